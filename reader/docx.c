/* Word reader: cq_reader_read_docx, with libzip (the archive, from memory) and libxml2 (its XML parts).
 *
 * What is read: word/document.xml (the body), word/styles.xml (which paragraph styles are headings, which carry a
 * numbering), word/numbering.xml (list and heading numbers) and docProps/core.xml (the title). The body gives one
 * block (reader_internal.h) per paragraph and per table row:
 *   - a paragraph styled as a heading ("heading 1".."heading 9", the Chinese "标题 1".., or an outline level) is
 *     marked as a heading of that level (the structure parser takes it as one whatever its wording);
 *   - a numbered paragraph starts with the number Word shows for it ("第一章", "（一）", "1.2", "•"), counted per
 *     list as Word counts (w:numId → w:abstractNum; a deeper level restarts under a shallower one);
 *   - a table row is its cells' text joined by " | " (a table of one column is read as paragraphs);
 *   - tracked deletions, hidden text, field instructions, table-of-contents entries and the fallback copy of
 *     drawings (mc:Fallback) are left out; text boxes follow the paragraph that anchors them.
 * Headers, footers, footnotes and comments are not read.
 *
 * Bad input fails with a message and nothing else: a truncated or damaged archive, an archive without
 * word/document.xml, a part that expands beyond DOCX_MAX_PART_BYTES (declared or actually read: zip bombs),
 * more than DOCX_MAX_TOTAL_BYTES in all, XML that is not well-formed UTF-8 or nests deeper than libxml2's default
 * limit (XML_PARSE_HUGE stays off), and any DOCTYPE (Word never writes one; refusing it rules out entity expansion
 * bombs and external entities before libxml2 sees the text, which is parsed without entity substitution and
 * without network access anyway).
 *
 * Cost (issue 29): libxml2's DOM and the parts' bytes count against the document's memory budget
 * (cq_reader_limits.max_bytes; libxml2's allocations are counted per thread through its allocator hooks, and the parts
 * are parsed in chunks: past the budget the parse stops, "document too large"); styles, lists and list definitions
 * are found by binary search; the cancel flag is looked at between chunks and every DOCX_CANCEL_EVERY body
 * elements. */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <zip.h>

#include "core/numerals.h"
#include "core/strbuf.h"
#include "core/utf8.h"
#include "reader/reader_internal.h"

#define DOCX_MAX_PART_BYTES (64u << 20)   /* one XML part, expanded */
#define DOCX_MAX_TOTAL_BYTES (128u << 20) /* every part read, expanded */
#define DOCX_MAX_STYLES 4096
#define DOCX_MAX_LISTS 4096
#define DOCX_LEVELS 9
#define DOCX_MAX_DEFERRED 64 /* text boxes anchored in one paragraph */
#define DOCX_CANCEL_EVERY 256 /* body elements between looks at the cancel flag */
#define DOCX_PARSE_CHUNK (64u << 10) /* bytes of XML parsed between looks at the budget and the cancel flag */

/* ---------------------------------------------------------------------------------------------------------
 * XML helpers: WordprocessingML elements by local name (transitional and strict namespaces alike)
 * --------------------------------------------------------------------------------------------------------- */

static bool ns_is(const xmlNode *n, const char *suffix) {
    if (!n->ns || !n->ns->href) return false;
    size_t h = strlen((const char *)n->ns->href), s = strlen(suffix);
    return h >= s && !strcmp((const char *)n->ns->href + h - s, suffix);
}

/* w:NAME (wordprocessingml/2006/main, or the strict wordprocessingml/main) */
static bool is_w(const xmlNode *n, const char *local) {
    return n && n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, local) &&
           (ns_is(n, "wordprocessingml/2006/main") || ns_is(n, "wordprocessingml/main"));
}

static bool is_elem(const xmlNode *n, const char *local) {
    return n && n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, local);
}

static xmlNode *child_w(const xmlNode *n, const char *local) {
    for (xmlNode *c = n ? n->children : NULL; c; c = c->next)
        if (is_w(c, local)) return c;
    return NULL;
}

/* The value of attribute `local` (any namespace: w:val, w:styleId …), or NULL. Points into the tree. */
static const char *attr(const xmlNode *n, const char *local) {
    for (xmlAttr *a = n ? n->properties : NULL; a; a = a->next)
        if (!strcmp((const char *)a->name, local))
            return a->children && a->children->content ? (const char *)a->children->content : "";
    return NULL;
}

static int attr_int(const xmlNode *n, const char *local, int dflt) {
    const char *v = attr(n, local);
    if (!v || !*v) return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    return *end || x < -1000000 || x > 1000000 ? dflt : (int)x;
}

/* A toggle property (<w:vanish/>, <w:vanish w:val="false"/>): present and not switched off. */
static bool toggle_on(const xmlNode *n) {
    if (!n) return false;
    const char *v = attr(n, "val");
    return !v || !(!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "off"));
}

/* ---------------------------------------------------------------------------------------------------------
 * Styles and numbering
 * --------------------------------------------------------------------------------------------------------- */

typedef struct {
    char id[64], based_on[64];
    int heading;        /* 1..9 from the name or the outline level; 0 none; -1 explicitly body text */
    bool title, toc;    /* "Title"; "TOC 1".."TOC 9" / "TOC Heading" */
    int num_id, ilvl;   /* numbering the style carries: num_id -1 none, 0 switched off */
} docx_style;

typedef struct {
    int start;
    char fmt[40];       /* w:numFmt: decimal, chineseCounting, bullet, … */
    char text[96];      /* w:lvlText: "第%1章", "%1.%2", "" … */
    bool legal;         /* w:isLgl: the levels it shows appear as decimals */
    char suffix;        /* 't' tab, 's' space, 'n' nothing */
} docx_level;

typedef struct {
    int id;
    docx_level lvl[DOCX_LEVELS];
    int counter[DOCX_LEVELS];
    bool started[DOCX_LEVELS];
} docx_abstract;

typedef struct {
    int id, abstract;              /* index into the abstract list, -1 unknown */
    int abstract_id;               /* the w:abstractNumId it names */
    int start_override[DOCX_LEVELS]; /* -1 none */
    bool override_done[DOCX_LEVELS];
} docx_num;

/* Keys of lookup tables sorted by id (then by position). */
typedef struct {
    const char *id;
    uint32_t at;
} style_key;

typedef struct {
    int id;
    uint32_t at;
} num_key;

typedef struct {
    docx_style *styles;
    size_t n_styles;
    style_key *style_order; /* styles by id (then by position): lookups by binary search */
    docx_abstract *abstracts;
    size_t n_abstracts;
    docx_num *nums;
    size_t n_nums;
    num_key *num_order;       /* nums by id (then by position) */
    num_key *abstract_order;  /* abstracts by id (then by position) */
    cq_dt_blocks *blocks;
    const cq_reader_limits *limits;
    size_t paragraphs;        /* read so far, for the cancel flag */
    bool cancelled;
    xmlNode *deferred[DOCX_MAX_DEFERRED]; /* text boxes of the paragraph, read after it */
    size_t n_deferred;
    char *title;          /* the first paragraph styled "Title" */
    bool nomem;
} docx;

/* "heading 3" / "Heading3" / "标题 3" / "标题3" → 3 */
static int heading_of_name(const char *name) {
    const char *p = NULL;
    if (!strncasecmp(name, "heading", 7)) p = name + 7;
    else if (!strncmp(name, "标题", strlen("标题"))) p = name + strlen("标题");
    if (!p) return 0;
    while (*p == ' ') p++;
    return p[0] >= '1' && p[0] <= '9' && !p[1] ? p[0] - '0' : 0;
}

/* Sorting and searching by id: the first of equal ids in document order wins, as a linear search found it. */
static int cmp_style_key(const void *a, const void *b) {
    const style_key *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

static int cmp_num_key(const void *a, const void *b) {
    const num_key *x = a, *y = b;
    if (x->id != y->id) return (x->id > y->id) - (x->id < y->id);
    return (x->at > y->at) - (x->at < y->at);
}

/* O(log n): 4,096 styles with deep basedOn chains made every paragraph walk the list (50k paragraphs 43 s). */
static const docx_style *style_find(const docx *d, const char *id) {
    if (!id || !d->style_order) return NULL;
    size_t lo = 0, hi = d->n_styles;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(d->style_order[mid].id, id) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < d->n_styles && !strcmp(d->style_order[lo].id, id) ? &d->styles[d->style_order[lo].at] : NULL;
}

/* The first of keys[0..n) (sorted) with this id, as an index of what they sort, or -1. */
static int num_key_find(const num_key *keys, size_t n, int id) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (keys[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && keys[lo].id == id ? (int)keys[lo].at : -1;
}

static num_key *num_keys(size_t n, const void *items, size_t item_size, size_t id_offset) {
    num_key *k = malloc((n ? n : 1) * sizeof *k);
    if (!k) return NULL;
    for (size_t i = 0; i < n; i++) {
        int id;
        memcpy(&id, (const char *)items + i * item_size + id_offset, sizeof id);
        k[i] = (num_key){id, (uint32_t)i};
    }
    qsort(k, n, sizeof *k, cmp_num_key);
    return k;
}

/* Style properties through the basedOn chain: the first style that states it. */
static int style_heading(const docx *d, const docx_style *s) {
    for (int hop = 0; s && hop < 16; hop++, s = style_find(d, s->based_on))
        if (s->heading) return s->heading > 0 ? s->heading : 0;
    return 0;
}

static const docx_style *style_numbering(const docx *d, const docx_style *s) {
    for (int hop = 0; s && hop < 16; hop++, s = style_find(d, s->based_on))
        if (s->num_id >= 0) return s;
    return NULL;
}

static void read_styles(docx *d, xmlNode *root) {
    size_t n = 0;
    for (xmlNode *c = root ? root->children : NULL; c; c = c->next) n += is_w(c, "style");
    if (n > DOCX_MAX_STYLES) n = DOCX_MAX_STYLES;
    d->styles = n ? calloc(n, sizeof *d->styles) : NULL;
    if (n && !d->styles) {
        d->nomem = true;
        return;
    }
    for (xmlNode *c = root ? root->children : NULL; c && d->n_styles < n; c = c->next) {
        if (!is_w(c, "style")) continue;
        const char *type = attr(c, "type");
        if (type && strcmp(type, "paragraph")) continue;
        docx_style *s = &d->styles[d->n_styles++];
        snprintf(s->id, sizeof s->id, "%s", attr(c, "styleId") ? attr(c, "styleId") : "");
        const char *based = attr(child_w(c, "basedOn"), "val");
        snprintf(s->based_on, sizeof s->based_on, "%s", based ? based : "");
        s->num_id = -1;
        const char *name = attr(child_w(c, "name"), "val");
        if (name) {
            s->heading = heading_of_name(name);
            s->title = !strcasecmp(name, "title") || !strcmp(name, "标题");
            s->toc = (!strncasecmp(name, "toc ", 4) && name[4] >= '1' && name[4] <= '9') ||
                     !strcasecmp(name, "toc heading");
        }
        xmlNode *ppr = child_w(c, "pPr");
        xmlNode *outline = child_w(ppr, "outlineLvl");
        if (outline && !s->heading) {
            int v = attr_int(outline, "val", 9);
            s->heading = v >= 0 && v <= 8 ? v + 1 : -1;
        }
        xmlNode *numpr = child_w(ppr, "numPr");
        if (numpr) {
            s->num_id = attr_int(child_w(numpr, "numId"), "val", 0);
            s->ilvl = attr_int(child_w(numpr, "ilvl"), "val", 0);
        }
    }
    if (!d->n_styles) return;
    d->style_order = malloc(d->n_styles * sizeof *d->style_order);
    if (!d->style_order) {
        d->nomem = true;
        return;
    }
    for (size_t i = 0; i < d->n_styles; i++) d->style_order[i] = (style_key){d->styles[i].id, (uint32_t)i};
    qsort(d->style_order, d->n_styles, sizeof *d->style_order, cmp_style_key);
}

static void read_numbering(docx *d, xmlNode *root) {
    size_t na = 0, nn = 0;
    for (xmlNode *c = root ? root->children : NULL; c; c = c->next) {
        na += is_w(c, "abstractNum");
        nn += is_w(c, "num");
    }
    if (na > DOCX_MAX_LISTS) na = DOCX_MAX_LISTS;
    if (nn > DOCX_MAX_LISTS) nn = DOCX_MAX_LISTS;
    d->abstracts = na ? calloc(na, sizeof *d->abstracts) : NULL;
    d->nums = nn ? calloc(nn, sizeof *d->nums) : NULL;
    if ((na && !d->abstracts) || (nn && !d->nums)) {
        d->nomem = true;
        return;
    }
    for (xmlNode *c = root ? root->children : NULL; c; c = c->next) {
        if (is_w(c, "abstractNum") && d->n_abstracts < na) {
            docx_abstract *a = &d->abstracts[d->n_abstracts++];
            a->id = attr_int(c, "abstractNumId", -1);
            for (int l = 0; l < DOCX_LEVELS; l++) {
                a->lvl[l].start = 1;
                snprintf(a->lvl[l].fmt, sizeof a->lvl[l].fmt, "decimal");
                a->lvl[l].suffix = 't';
            }
            for (xmlNode *lv = c->children; lv; lv = lv->next) {
                if (!is_w(lv, "lvl")) continue;
                int l = attr_int(lv, "ilvl", -1);
                if (l < 0 || l >= DOCX_LEVELS) continue;
                docx_level *L = &a->lvl[l];
                L->start = attr_int(child_w(lv, "start"), "val", 1);
                const char *fmt = attr(child_w(lv, "numFmt"), "val");
                if (fmt) snprintf(L->fmt, sizeof L->fmt, "%s", fmt);
                const char *text = attr(child_w(lv, "lvlText"), "val");
                snprintf(L->text, sizeof L->text, "%s", text ? text : "");
                L->legal = toggle_on(child_w(lv, "isLgl"));
                const char *suff = attr(child_w(lv, "suff"), "val");
                L->suffix = !suff ? 't' : !strcmp(suff, "space") ? 's' : !strcmp(suff, "nothing") ? 'n' : 't';
            }
        } else if (is_w(c, "num") && d->n_nums < nn) {
            docx_num *m = &d->nums[d->n_nums++];
            m->id = attr_int(c, "numId", -1);
            m->abstract_id = attr_int(child_w(c, "abstractNumId"), "val", -1);
            m->abstract = -1;
            for (int l = 0; l < DOCX_LEVELS; l++) m->start_override[l] = -1;
            for (xmlNode *o = c->children; o; o = o->next) {
                if (!is_w(o, "lvlOverride")) continue;
                int l = attr_int(o, "ilvl", -1);
                xmlNode *so = child_w(o, "startOverride");
                if (l >= 0 && l < DOCX_LEVELS && so) m->start_override[l] = attr_int(so, "val", 1);
            }
        }
    }
    /* <w:num> may come before the <w:abstractNum> it names in hand-made files: each is resolved once all are read,
     * by binary search (a second walk of the part per unresolved num was quadratic: 4,096 nums naming no list ran
     * for minutes) */
    d->abstract_order = num_keys(d->n_abstracts, d->abstracts, sizeof *d->abstracts, offsetof(docx_abstract, id));
    d->num_order = num_keys(d->n_nums, d->nums, sizeof *d->nums, offsetof(docx_num, id));
    if (!d->abstract_order || !d->num_order) {
        d->nomem = true;
        return;
    }
    for (size_t k = 0; k < d->n_nums; k++)
        d->nums[k].abstract = num_key_find(d->abstract_order, d->n_abstracts, d->nums[k].abstract_id);
}

/* ---- numbers as Word shows them ---- */

static void put_roman(cq_strbuf *b, int v, bool upper) {
    static const int val[] = {1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 4, 1};
    static const char *const up[] = {"M", "CM", "D", "CD", "C", "XC", "L", "XL", "X", "IX", "V", "IV", "I"};
    static const char *const low[] = {"m", "cm", "d", "cd", "c", "xc", "l", "xl", "x", "ix", "v", "iv", "i"};
    if (v <= 0 || v >= 4000) {
        cq_strbuf_printf(b, "%d", v);
        return;
    }
    for (int i = 0; i < 13; i++)
        while (v >= val[i]) {
            cq_strbuf_puts(b, upper ? up[i] : low[i]);
            v -= val[i];
        }
}

/* A, B, … Z, AA, BB, … (Word repeats the letter) */
static void put_letter(cq_strbuf *b, int v, bool upper) {
    if (v <= 0) {
        cq_strbuf_printf(b, "%d", v);
        return;
    }
    int times = (v - 1) / 26 + 1;
    char c = (char)((upper ? 'A' : 'a') + (v - 1) % 26);
    for (int i = 0; i < times && i < 8; i++) cq_strbuf_append(b, &c, 1);
}

/* 壹贰叁 for 一二三 (chineseLegalSimplified) */
static void put_cn_financial(cq_strbuf *b, const char *cn) {
    static const char *const from[] = {"零", "一", "二", "三", "四", "五", "六", "七", "八", "九", "十", "百", "千", "万"};
    static const char *const to[] = {"零", "壹", "贰", "叁", "肆", "伍", "陆", "柒", "捌", "玖", "拾", "佰", "仟", "万"};
    while (*cn) {
        bool done = false;
        for (size_t i = 0; i < sizeof from / sizeof *from && !done; i++) {
            size_t l = strlen(from[i]);
            if (!strncmp(cn, from[i], l)) {
                cq_strbuf_puts(b, to[i]);
                cn += l;
                done = true;
            }
        }
        if (!done) cq_strbuf_append(b, cn++, 1);
    }
}

static void put_number(cq_strbuf *b, int v, const char *fmt) {
    static const char *const stems[] = {"甲", "乙", "丙", "丁", "戊", "己", "庚", "辛", "壬", "癸"};
    static const char *const branches[] = {"子", "丑", "寅", "卯", "辰", "巳", "午", "未", "申", "酉", "戌", "亥"};
    static const char *const digits_cn[] = {"〇", "一", "二", "三", "四", "五", "六", "七", "八", "九"};
    char cn[64];
    if (!strcmp(fmt, "upperRoman")) put_roman(b, v, true);
    else if (!strcmp(fmt, "lowerRoman")) put_roman(b, v, false);
    else if (!strcmp(fmt, "upperLetter")) put_letter(b, v, true);
    else if (!strcmp(fmt, "lowerLetter")) put_letter(b, v, false);
    else if (!strcmp(fmt, "decimalZero")) cq_strbuf_printf(b, "%02d", v);
    else if ((!strcmp(fmt, "chineseCounting") || !strcmp(fmt, "chineseCountingThousand") ||
              !strcmp(fmt, "taiwaneseCounting") || !strcmp(fmt, "taiwaneseCountingThousand") ||
              !strcmp(fmt, "japaneseCounting")) && v >= 0 && v < 100000000)
        cq_strbuf_puts(b, cq_number_format_cn(v, cn));
    else if (!strcmp(fmt, "chineseLegalSimplified") && v >= 0 && v < 100000000)
        put_cn_financial(b, cq_number_format_cn(v, cn));
    else if (!strcmp(fmt, "ideographTraditional") && v >= 1 && v <= 10) cq_strbuf_puts(b, stems[v - 1]);
    else if (!strcmp(fmt, "ideographZodiac") && v >= 1 && v <= 12) cq_strbuf_puts(b, branches[v - 1]);
    else if (!strcmp(fmt, "ideographDigital") || !strcmp(fmt, "taiwaneseDigital")) {
        char dec[16];
        snprintf(dec, sizeof dec, "%d", v);
        for (const char *p = dec; *p; p++) cq_strbuf_puts(b, *p >= '0' && *p <= '9' ? digits_cn[*p - '0'] : "");
    } else if ((!strcmp(fmt, "decimalEnclosedCircle") || !strcmp(fmt, "decimalEnclosedCircleChinese")) && v >= 1 &&
               v <= 20)
        cq_strbuf_put_cp(b, 0x2460 + (uint32_t)(v - 1)); /* ① */
    else if (!strcmp(fmt, "decimalEnclosedParen") && v >= 1 && v <= 20) cq_strbuf_put_cp(b, 0x2474 + (uint32_t)(v - 1));
    else if (!strcmp(fmt, "decimalEnclosedFullstop") && v >= 1 && v <= 20)
        cq_strbuf_put_cp(b, 0x2488 + (uint32_t)(v - 1)); /* ⒈ */
    else cq_strbuf_printf(b, "%d", v); /* decimal, decimalFullWidth (repair makes it ASCII anyway), ordinal … */
}

static docx_num *num_find(docx *d, int id) {
    int i = d->num_order ? num_key_find(d->num_order, d->n_nums, id) : -1;
    return i >= 0 ? &d->nums[i] : NULL;
}

/* Counts the paragraph in list num_id at level ilvl and appends the number Word shows for it. */
static void put_list_number(docx *d, int num_id, int ilvl, cq_strbuf *out) {
    docx_num *m = num_find(d, num_id);
    if (!m || m->abstract < 0 || ilvl < 0 || ilvl >= DOCX_LEVELS) return;
    docx_abstract *a = &d->abstracts[m->abstract];
    if (m->start_override[ilvl] >= 0 && !m->override_done[ilvl]) {
        /* this list instance restarts the level */
        a->counter[ilvl] = m->start_override[ilvl];
        a->started[ilvl] = true;
        m->override_done[ilvl] = true;
    } else if (a->started[ilvl]) {
        a->counter[ilvl]++;
    } else {
        a->counter[ilvl] = a->lvl[ilvl].start;
        a->started[ilvl] = true;
    }
    for (int l = ilvl + 1; l < DOCX_LEVELS; l++) a->started[l] = false; /* deeper levels restart */
    const docx_level *L = &a->lvl[ilvl];
    if (!strcmp(L->fmt, "none")) return;
    if (!strcmp(L->fmt, "bullet")) {
        cq_strbuf_puts(out, "• ");
        return;
    }
    size_t before = out->len;
    for (const char *p = L->text; *p; p++) {
        if (p[0] == '%' && p[1] >= '1' && p[1] <= '9') {
            int l = p[1] - '1';
            int v = a->started[l] ? a->counter[l] : a->lvl[l].start;
            put_number(out, v, L->legal ? "decimal" : a->lvl[l].fmt);
            p++;
        } else {
            cq_strbuf_append(out, p, 1);
        }
    }
    if (out->len > before && L->suffix != 'n') cq_strbuf_append(out, " ", 1);
}

/* ---------------------------------------------------------------------------------------------------------
 * The body
 * --------------------------------------------------------------------------------------------------------- */

/* Elements whose content is not text the reader sees. */
static bool skipped(const xmlNode *n) {
    static const char *const names[] = {"pPr", "rPr", "del", "moveFrom", "delText", "instrText", "fldData",
                                        "footnoteReference", "endnoteReference", "commentReference",
                                        "annotationRef", "tblPr", "trPr", "tcPr", "sectPr", "delInstrText"};
    if (is_elem(n, "Fallback")) return true; /* mc:Fallback repeats what mc:Choice holds */
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (is_w(n, names[i])) return true;
    return false;
}

/* The text of a paragraph's content (runs, hyperlinks, fields, insertions …), depth-first, into b. */
static void para_inline(docx *d, const xmlNode *n, cq_strbuf *b) {
    for (xmlNode *c = n->children; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || skipped(c)) continue;
        const char *name = (const char *)c->name;
        if (!strcmp(name, "t") && (is_w(c, "t") || ns_is(c, "officeDocument/2006/math"))) {
            for (xmlNode *t = c->children; t; t = t->next)
                if ((t->type == XML_TEXT_NODE || t->type == XML_CDATA_SECTION_NODE) && t->content)
                    cq_strbuf_puts(b, (const char *)t->content);
        } else if (is_w(c, "tab") || is_w(c, "ptab")) {
            cq_strbuf_append(b, "\t", 1);
        } else if (is_w(c, "br") || is_w(c, "cr")) {
            cq_strbuf_append(b, "\n", 1);
        } else if (is_w(c, "noBreakHyphen")) {
            cq_strbuf_append(b, "-", 1);
        } else if (is_w(c, "sym")) {
            /* w:char is a code in the symbol font: private-use (F0xx) codes are font glyphs, not characters */
            const char *hex = attr(c, "char");
            unsigned long cp = hex ? strtoul(hex, NULL, 16) : 0;
            if (cp >= 0x20 && !(cp >= 0xE000 && cp <= 0xF8FF) && cp < 0x110000) cq_strbuf_put_cp(b, (uint32_t)cp);
        } else if (is_w(c, "r")) {
            if (!toggle_on(child_w(child_w(c, "rPr"), "vanish"))) para_inline(d, c, b);
        } else if (is_w(c, "txbxContent")) {
            if (d->n_deferred < DOCX_MAX_DEFERRED) d->deferred[d->n_deferred++] = c;
        } else {
            para_inline(d, c, b);
        }
    }
}

static void body_blocks(docx *d, const xmlNode *n);

/* A paragraph as one block: its number, its text; a heading style marks it. */
static void paragraph(docx *d, const xmlNode *p, cq_strbuf *into) {
    xmlNode *ppr = child_w(p, "pPr");
    const docx_style *style = style_find(d, attr(child_w(ppr, "pStyle"), "val"));
    if (style && style->toc) return; /* a table of contents repeats the headings */
    int heading = style_heading(d, style);
    xmlNode *outline = child_w(ppr, "outlineLvl");
    if (outline) {
        int v = attr_int(outline, "val", 9);
        heading = v >= 0 && v <= 8 ? v + 1 : 0;
    }
    xmlNode *numpr = child_w(ppr, "numPr");
    int num_id = -1, ilvl = 0;
    if (numpr) {
        num_id = attr_int(child_w(numpr, "numId"), "val", 0);
        ilvl = attr_int(child_w(numpr, "ilvl"), "val", 0);
        if (!child_w(numpr, "ilvl")) {
            const docx_style *ns = style_numbering(d, style);
            if (ns) ilvl = ns->ilvl;
        }
    } else {
        const docx_style *ns = style_numbering(d, style);
        if (ns) {
            num_id = ns->num_id;
            ilvl = ns->ilvl;
        }
    }
    size_t first_deferred = d->n_deferred;
    cq_strbuf text = {0};
    para_inline(d, p, &text);
    bool has_text = false;
    for (size_t i = 0; i < text.len && !has_text; i++)
        has_text = text.data[i] != ' ' && text.data[i] != '\t' && text.data[i] != '\n';
    if (num_id > 0) {
        cq_strbuf num = {0};
        put_list_number(d, num_id, ilvl, &num);
        if (has_text && num.len) {
            cq_strbuf_append(&num, text.data, text.len);
            cq_strbuf_free(&text);
            text = num;
        } else {
            cq_strbuf_free(&num);
        }
    }
    if (text.failed) d->nomem = true;
    if (has_text) {
        if (into) {
            /* a paragraph inside a table cell: part of the row's line */
            if (into->len) cq_strbuf_append(into, " ", 1);
            for (size_t i = 0; i < text.len; i++)
                cq_strbuf_append(into, text.data[i] == '\n' ? " " : text.data + i, 1);
        } else {
            if (style && style->title && !d->title) d->title = cq_dt_title(text.data, text.len);
            cq_dt_blocks_add(d->blocks, text.data, text.len, heading);
        }
    }
    cq_strbuf_free(&text);
    /* text boxes anchored here, after the paragraph */
    size_t last = d->n_deferred;
    for (size_t i = first_deferred; i < last; i++) {
        if (into) {
            for (xmlNode *c = d->deferred[i]->children; c; c = c->next)
                if (is_w(c, "p")) paragraph(d, c, into);
        } else {
            body_blocks(d, d->deferred[i]);
        }
    }
    d->n_deferred = first_deferred;
}

static void cell_text(docx *d, const xmlNode *n, cq_strbuf *into) {
    for (xmlNode *c = n->children; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || skipped(c)) continue;
        if (is_w(c, "p")) paragraph(d, c, into);
        else cell_text(d, c, into); /* nested tables, rows, cells, content controls */
    }
}

static void table_rows(docx *d, const xmlNode *n, bool one_column);

static void table(docx *d, const xmlNode *tbl) {
    /* a table whose rows all have one cell is layout, not data: its paragraphs are read as paragraphs */
    size_t max_cells = 0;
    for (xmlNode *r = tbl->children; r; r = r->next) {
        if (!is_w(r, "tr")) continue;
        size_t cells = 0;
        for (xmlNode *c = r->children; c; c = c->next) cells += is_w(c, "tc");
        if (cells > max_cells) max_cells = cells;
    }
    table_rows(d, tbl, max_cells <= 1);
}

static void table_rows(docx *d, const xmlNode *n, bool one_column) {
    for (xmlNode *r = n->children; r; r = r->next) {
        if (r->type != XML_ELEMENT_NODE || skipped(r)) continue;
        if (!is_w(r, "tr")) {
            table_rows(d, r, one_column); /* rows inside content controls or custom XML */
            continue;
        }
        if (one_column) {
            for (xmlNode *c = r->children; c; c = c->next)
                if (is_w(c, "tc")) body_blocks(d, c);
            continue;
        }
        cq_strbuf row = {0}, cell = {0};
        for (xmlNode *c = r->children; c; c = c->next) {
            if (!is_w(c, "tc")) continue;
            cell.len = 0;
            cell_text(d, c, &cell);
            if (!cell.len) continue; /* merged or empty cells */
            if (row.len) cq_strbuf_append(&row, " | ", 3);
            cq_strbuf_append(&row, cell.data, cell.len);
        }
        if (row.failed || cell.failed) d->nomem = true;
        else if (row.len) cq_dt_blocks_add(d->blocks, row.data, row.len, 0);
        cq_strbuf_free(&row);
        cq_strbuf_free(&cell);
    }
}

static void body_blocks(docx *d, const xmlNode *n) {
    for (xmlNode *c = n->children; c && !d->nomem && !d->cancelled; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || skipped(c)) continue;
        if (++d->paragraphs % DOCX_CANCEL_EVERY == 0 && d->limits && d->limits->cancel &&
            atomic_load(d->limits->cancel)) {
            d->cancelled = true;
            return;
        }
        if (is_w(c, "p")) paragraph(d, c, NULL);
        else if (is_w(c, "tbl")) table(d, c);
        else body_blocks(d, c); /* w:sdt / w:sdtContent, w:customXml, w:ins … */
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * The archive and its XML parts
 * --------------------------------------------------------------------------------------------------------- */

/* libxml2's memory, counted per reading. libxml2 allocates through hooks that are global to the process
 * (xmlMemSetup); they count what each thread's libxml2 holds into that thread's current docx_mem, when it has one.
 * They never refuse (libxml2 2.9 leaks on some of its out-of-memory paths): the parts are parsed in chunks
 * (DOCX_PARSE_CHUNK) and the parse stops between two chunks once the reading is past its budget or cancelled, an
 * overshoot of what one chunk can build. The parts' own buffers are refused past the budget. A 125 KB file whose
 * parts inflate to 2 x 61 MB of <a/> made a DOM of 4.4 GB; now the DOM, the parts' bytes and the text count against
 * --doc-memory-mb. */
typedef struct {
    size_t bytes, peak;      /* held now by libxml2 and the parts' buffers; most held */
    size_t limit;            /* 0: none */
    const atomic_bool *cancel;
    bool refused, cancelled;
} docx_mem;

static _Thread_local docx_mem *tl_mem;

/* Whether the reading may go on: within its budget (with `more` bytes), not cancelled. Sets the flag that stops it. */
static bool mem_allows(docx_mem *m, size_t more) {
    if (m->cancel && atomic_load(m->cancel)) m->cancelled = true;
    if (m->limit && (more > m->limit || m->bytes + more > m->limit)) m->refused = true;
    return !m->cancelled && !m->refused;
}

static void mem_add(docx_mem *m, void *p) {
    m->bytes += malloc_usable_size(p);
    if (m->bytes > m->peak) m->peak = m->bytes;
}

static void mem_sub(docx_mem *m, void *p) {
    size_t n = malloc_usable_size(p);
    m->bytes = m->bytes > n ? m->bytes - n : 0; /* a block allocated before the reading began */
}

static void *xml_malloc(size_t n) {
    docx_mem *m = tl_mem;
    void *p = malloc(n);
    if (m && p) mem_add(m, p);
    return p;
}

static void *xml_realloc(void *old, size_t n) {
    docx_mem *m = tl_mem;
    size_t had = old ? malloc_usable_size(old) : 0;
    void *p = realloc(old, n);
    if (m && p) {
        m->bytes = m->bytes > had ? m->bytes - had : 0;
        mem_add(m, p);
    }
    return p;
}

static void xml_free(void *p) {
    if (!p) return;
    if (tl_mem) mem_sub(tl_mem, p);
    free(p);
}

/* The parts' buffers: counted as libxml2's memory is, refused past the budget. */
static void *part_malloc(size_t n) {
    if (tl_mem && !mem_allows(tl_mem, n)) return NULL;
    return xml_malloc(n);
}

static void *part_realloc(void *old, size_t n) {
    size_t had = old ? malloc_usable_size(old) : 0;
    if (tl_mem && n > had && !mem_allows(tl_mem, n - had)) return NULL;
    return xml_realloc(old, n);
}

static char *xml_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = xml_malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* libxml2 reports some errors (an allocation refused) through its generic handler, to stderr by default */
static void xml_quiet(void *ctx, const char *msg, ...) { (void)ctx, (void)msg; }

static pthread_once_t xml_once = PTHREAD_ONCE_INIT;
static void xml_init(void) {
    xmlMemSetup(xml_free, xml_malloc, xml_realloc, xml_strdup);
    xmlInitParser();
}

/* Reads the part `name` (NOT_FOUND when the archive has none). *budget counts down the bytes all parts may take. */
static cq_status read_part(zip_t *z, const char *name, char **out, size_t *len, size_t *budget, cq_err *err) {
    *out = NULL;
    *len = 0;
    zip_int64_t idx = zip_name_locate(z, name, 0);
    if (idx < 0) idx = zip_name_locate(z, name, ZIP_FL_NOCASE);
    if (idx < 0) return CQ_ERR_NOT_FOUND;
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z, (zip_uint64_t)idx, 0, &st) != 0)
        return cq_err_set(err, CQ_ERR_FORMAT, "damaged Word file: cannot read the entry %s (%s)", name,
                          zip_strerror(z));
    if ((st.valid & ZIP_STAT_SIZE) && st.size > DOCX_MAX_PART_BYTES)
        return cq_err_set_reason(err, CQ_ERR_UNSUPPORTED, "too_large",
                                 "%s would expand to %llu MB, more than the %u MB a part may have (a zip bomb?)", name,
                                 (unsigned long long)(st.size >> 20), DOCX_MAX_PART_BYTES >> 20);
    size_t cap = DOCX_MAX_PART_BYTES < *budget ? DOCX_MAX_PART_BYTES : *budget;
    zip_file_t *f = zip_fopen_index(z, (zip_uint64_t)idx, 0);
    if (!f)
        return cq_err_set(err, CQ_ERR_FORMAT, "damaged Word file: cannot open the entry %s (%s)", name,
                          zip_strerror(z));
    size_t want = (st.valid & ZIP_STAT_SIZE) ? (st.size < cap ? (size_t)st.size : cap) : (cap < (1u << 20) ? cap : 1u << 20);
    size_t size = want + 1, n = 0;
    char *buf = part_malloc(size + 1); /* counted, as libxml2's memory is */
    cq_status rc = buf ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory reading %s", name);
    while (!rc) {
        if (n == size) { /* the declared size was wrong: grow up to the cap */
            if (size > cap) {
                rc = cq_err_set_reason(err, CQ_ERR_UNSUPPORTED, "too_large",
                                       "%s expands to more than %zu MB (a zip bomb, or a document too large to read)",
                                       name, cap >> 20);
                break;
            }
            size_t nsize = size * 2 > cap + 1 ? cap + 1 : size * 2;
            char *nb = part_realloc(buf, nsize + 1);
            if (!nb) {
                rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory reading %s", name);
                break;
            }
            buf = nb;
            size = nsize;
        }
        zip_int64_t got = zip_fread(f, buf + n, size - n);
        if (got < 0) {
            rc = cq_err_set(err, CQ_ERR_FORMAT, "damaged Word file: %s cannot be decompressed (%s)", name,
                            zip_file_strerror(f));
            break;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    zip_fclose(f);
    if (!rc && n > cap)
        rc = cq_err_set_reason(err, CQ_ERR_UNSUPPORTED, "too_large",
                               "%s expands to more than %zu MB (a zip bomb, or a document too large to read)", name,
                               cap >> 20);
    if (rc) {
        xml_free(buf);
        return rc;
    }
    buf[n] = 0;
    *budget -= n;
    *out = buf;
    *len = n;
    return CQ_OK;
}

/* Parses one XML part: no DTD at all, no entity substitution, no network, libxml2's default limits, in chunks with
 * the budget and the cancel flag looked at between them. The bytes are read as UTF-8 whatever the part declares
 * (Word writes nothing else), so that the DTD check sees what the parser sees: a part that starts with a UTF-16 or
 * EBCDIC signature or holds a NUL byte (UTF-16, UTF-32) is refused. */
static cq_status parse_part(const char *name, const char *buf, size_t len, xmlDoc **out, cq_err *err) {
    *out = NULL;
    for (size_t i = 0; i + 9 <= len; i++)
        if (buf[i] == '<' && buf[i + 1] == '!' && !strncasecmp(buf + i + 2, "DOCTYPE", 7))
            return cq_err_set(err, CQ_ERR_FORMAT,
                              "%s declares a DTD (<!DOCTYPE>), which Word never writes: refused (its entities "
                              "could expand without bound)", name);
    const unsigned char *u = (const unsigned char *)buf;
    if ((len >= 2 && ((u[0] == 0xFE && u[1] == 0xFF) || (u[0] == 0xFF && u[1] == 0xFE))) ||
        (len >= 4 && !memcmp(buf, "\x4C\x6F\xA7\x94", 4)) || memchr(buf, 0, len))
        return cq_err_set(err, CQ_ERR_FORMAT, "damaged Word file: %s is not well-formed XML (not UTF-8)", name);
    pthread_once(&xml_once, xml_init);
    xmlParserCtxt *ctxt = xmlCreatePushParserCtxt(NULL, NULL, NULL, 0, name);
    if (!ctxt) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory parsing %s", name);
    xmlCtxtUseOptions(ctxt, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_IGNORE_ENC);
    docx_mem *m = tl_mem;
    bool stopped = false;
    size_t off = 0;
    do {
        size_t n = len - off < DOCX_PARSE_CHUNK ? len - off : DOCX_PARSE_CHUNK;
        xmlParseChunk(ctxt, buf + off, (int)n, off + n >= len);
        off += n;
        if (!ctxt->wellFormed) break;
        if (m && !mem_allows(m, 0)) {
            stopped = true;
            break;
        }
    } while (off < len);
    xmlDoc *doc = ctxt->myDoc;
    ctxt->myDoc = NULL;
    cq_status rc = CQ_OK;
    if (stopped) {
        rc = cq_err_set(err, m->cancelled ? CQ_ERR_CANCELLED : CQ_ERR_TOO_LARGE, "%s: %s", name,
                        m->cancelled ? "cancelled" : "over the memory budget");
    } else if (!doc || !ctxt->wellFormed) {
        const xmlError *e = xmlCtxtGetLastError(ctxt);
        char what[160] = "unknown error";
        if (e && e->message) {
            snprintf(what, sizeof what, "%s", e->message);
            size_t l = strlen(what);
            while (l && (what[l - 1] == '\n' || what[l - 1] == ' ')) what[--l] = 0;
        }
        rc = cq_err_set(err, CQ_ERR_FORMAT, "damaged Word file: %s is not well-formed XML (line %d: %s)", name,
                        e ? e->line : 0, what);
    }
    if (rc) {
        xmlFreeDoc(doc);
        doc = NULL;
    }
    xmlFreeParserCtxt(ctxt);
    *out = doc;
    return rc;
}

/* Reads and parses an optional part: a missing part is fine (*doc NULL), a bad one is an error. */
static cq_status optional_part(zip_t *z, const char *name, size_t *budget, xmlDoc **doc, cq_err *err) {
    char *buf;
    size_t len;
    *doc = NULL;
    cq_status rc = read_part(z, name, &buf, &len, budget, err);
    if (rc == CQ_ERR_NOT_FOUND) return CQ_OK;
    if (rc) return rc;
    rc = parse_part(name, buf, len, doc, err);
    xml_free(buf);
    return rc;
}

/* dc:title of docProps/core.xml */
static char *core_title(xmlDoc *core) {
    xmlNode *root = core ? xmlDocGetRootElement(core) : NULL;
    for (xmlNode *c = root ? root->children : NULL; c; c = c->next)
        if (is_elem(c, "title") && ns_is(c, "purl.org/dc/elements/1.1/")) {
            xmlChar *t = xmlNodeGetContent(c);
            char *title = t ? cq_dt_title((const char *)t, strlen((const char *)t)) : NULL;
            xmlFree(t);
            return title;
        }
    return NULL;
}

cq_status cq_reader_read_docx(const cq_reader_input *in, cq_doctext *out, cq_err *err) {
    if (!out) return cq_err_set(err, CQ_ERR_INVALID, "no output document given");
    memset(out, 0, sizeof *out);
    if (!in || (!in->data && in->len)) return cq_err_set(err, CQ_ERR_INVALID, "no input data given");
    if (in->len == 0) return cq_err_set(err, CQ_ERR_EMPTY, "the file is empty (0 bytes)");
    const cq_reader_limits *lim = in->limits;
    cq_status rc = cq_reader_check_cancel(lim, "before reading the Word document", err);
    if (rc) return rc;
    pthread_once(&xml_once, xml_init);
    docx_mem mem = {.limit = lim ? lim->max_bytes : 0, .cancel = lim ? lim->cancel : NULL};

    zip_error_t zerr;
    zip_error_init(&zerr);
    zip_source_t *src = zip_source_buffer_create(in->data, in->len, 0, &zerr);
    zip_t *z = src ? zip_open_from_source(src, ZIP_RDONLY, &zerr) : NULL;
    if (!z) {
        rc = cq_err_set(err, CQ_ERR_FORMAT, "damaged or truncated Word file: not a readable zip archive (%s)",
                        zip_error_strerror(&zerr));
        if (src) zip_source_free(src);
        zip_error_fini(&zerr);
        return rc;
    }
    zip_error_fini(&zerr);

    docx d = {.limits = lim};
    tl_mem = &mem; /* from here to the end, libxml2's memory and the parts' bytes count against the budget */
    xmlSetGenericErrorFunc(NULL, xml_quiet); /* this thread's libxml2 */
    xmlDoc *body_doc = NULL, *styles = NULL, *numbering = NULL, *core = NULL;
    size_t budget = DOCX_MAX_TOTAL_BYTES;
    char *buf = NULL;
    size_t len = 0;
    rc = read_part(z, "word/document.xml", &buf, &len, &budget, err);
    if (rc == CQ_ERR_NOT_FOUND)
        rc = cq_err_set(err, CQ_ERR_FORMAT, "a zip archive but not a Word document (no word/document.xml)");
    if (!rc) rc = parse_part("word/document.xml", buf, len, &body_doc, err);
    xml_free(buf);
    if (!rc) rc = optional_part(z, "word/styles.xml", &budget, &styles, err);
    if (!rc) rc = optional_part(z, "word/numbering.xml", &budget, &numbering, err);
    if (!rc) rc = optional_part(z, "docProps/core.xml", &budget, &core, err);
    zip_discard(z); /* read-only: nothing to write back; frees src too */
    if (!rc) {
        xmlNode *root = xmlDocGetRootElement(body_doc);
        xmlNode *body = is_w(root, "document") ? child_w(root, "body") : NULL;
        if (!body) rc = cq_err_set(err, CQ_ERR_FORMAT, "word/document.xml has no w:document/w:body: not a Word document");
        if (!rc) {
            read_styles(&d, styles ? xmlDocGetRootElement(styles) : NULL);
            read_numbering(&d, numbering ? xmlDocGetRootElement(numbering) : NULL);
            d.blocks = cq_dt_blocks_new();
            if (!d.blocks) d.nomem = true;
            if (!d.nomem) body_blocks(&d, body);
            if (d.cancelled) {
                rc = cq_err_set(err, CQ_ERR_CANCELLED, "cancelled while reading the Word document");
            } else if (d.nomem) {
                rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory reading the Word document");
            } else {
                char *title = d.title ? d.title : core_title(core);
                d.title = NULL;
                rc = cq_dt_blocks_finish(d.blocks, title, out, err);
                d.blocks = NULL;
                if (rc == CQ_ERR_EMPTY) cq_err_set(err, CQ_ERR_EMPTY, "the Word document contains no text");
            }
        }
    }
    cq_dt_blocks_free(d.blocks);
    free(d.title);
    free(d.styles);
    free(d.style_order);
    free(d.abstracts);
    free(d.abstract_order);
    free(d.nums);
    free(d.num_order);
    xmlFreeDoc(body_doc);
    xmlFreeDoc(styles);
    xmlFreeDoc(numbering);
    xmlFreeDoc(core);
    tl_mem = NULL;
    /* a refusal of the budget or the cancel flag shows up as whatever libxml2 or a part made of it */
    if (rc && mem.cancelled) rc = cq_err_set(err, CQ_ERR_CANCELLED, "cancelled while reading the Word document");
    else if (rc && mem.refused) rc = cq_reader_check_bytes(lim, SIZE_MAX, "the Word document's XML", err);
    return rc;
}
