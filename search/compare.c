/* Clause alignment and character diff (search/compare.h). */
#include "search/compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/strbuf.h"
#include "core/text_norm.h"
#include "core/utf8.h"
#include "search/router.h"

const char *cq_pair_kind_name(cq_pair_kind k) {
    static const char *const names[] = {"same", "changed", "added"}; /* in cq_pair_kind's order */
    return k >= CQ_PAIR_SAME && k < CQ_PAIR_REMOVED ? names[k] : "removed";
}

/* ---- tokens --------------------------------------------------------------------------------------------------- */

/* A token of a text: its byte span and an identity (a Han character's code point, a Latin word's hash, …). */
typedef struct {
    size_t start, end;
    uint64_t id;
} token;

static uint64_t fnv(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h | (1ull << 62); /* never a code point */
}

/* ASCII letters and digits: what Latin words are made of. */
static bool is_word_byte(unsigned char c) { return (unsigned)((c | 32) - 'a') < 26 || (unsigned)(c - '0') < 10; }

/* The token at byte i of s (n bytes): a Latin word (*word), a run of white space or one character (*cp: its
 * first). Returns where it ends. */
static size_t token_end(const char *s, size_t n, size_t i, uint32_t *cp, bool *word) {
    size_t len;
    *cp = cq_utf8_decode(s + i, n - i, &len);
    size_t j = i + (len ? len : 1);
    *word = *cp < 128 && is_word_byte((unsigned char)*cp);
    if (*word)
        while (j < n && is_word_byte((unsigned char)s[j])) j++;
    else if (cq_is_space(*cp))
        while (j < n && cq_is_space(cq_utf8_decode(s + j, n - j, &len))) j += len;
    return j;
}

/* Tokens of text for the diff: Han characters, Latin words (letters and digits), runs of white space, any other
 * character. Returns the count; *out malloc'd (NULL when text is empty). */
static size_t tokenize(const char *text, token **out) {
    size_t n = strlen(text), cap = n + 1, k = 0;
    token *t = malloc(cap * sizeof *t);
    *out = t;
    if (!t) return 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        bool word;
        size_t j = token_end(text, n, i, &cp, &word);
        t[k++] = (token){i, j, word || cq_is_space(cp) ? fnv(text + i, j - i) : cp};
        i = j;
    }
    return k;
}

/* ---- similarity ----------------------------------------------------------------------------------------------- */

/* A bigram of a clause: its id in the corpus's vocabulary and how often the clause holds it. */
typedef struct {
    uint32_t id, count;
} bigram;

/* A clause as the similarity sees it: its bigrams (sorted by id) and their total weight. */
typedef struct {
    bigram *bigrams;
    size_t n;
    double weight;  /* Σ count × idf */
    char *norm;     /* folded body without white space (equal norms: the same clause) */
    long number;    /* the clause's number (its label key's first part), 0 none */
} clause_bag;

/* Both sides' bags (a's clauses first, then b's) and the bigram weights. */
typedef struct {
    clause_bag *bags;
    size_t n_a, n_b;
    double *idf;
    bigram *scratch; /* a merged pair of bags */
} corpus;

/* The body of a clause: its text without the label it starts with ("第六十条 …"). */
static const char *body_of(const cq_cmp_clause *c) {
    const char *t = c->text ? c->text : "";
    if (c->label && *c->label && !strncmp(t, c->label, strlen(c->label))) {
        t += strlen(c->label);
        uint32_t cp;
        bool word;
        const size_t end = token_end(t, strlen(t), 0, &cp, &word); /* the white space after the label */
        if (cq_is_space(cp)) t += end;
    }
    return t;
}

/* Similarity tokens of a folded body: Han characters (and other letters) and Latin words; punctuation and white
 * space are dropped. */
static size_t sim_tokens(const char *norm, uint64_t **out) {
    size_t n = strlen(norm), k = 0;
    uint64_t *t = malloc((n + 1) * sizeof *t);
    *out = t;
    if (!t) return 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        bool word;
        size_t j = token_end(norm, n, i, &cp, &word);
        if (word) {
            t[k++] = fnv(norm + i, j - i);
        } else if (cp >= 128 && !cq_is_space(cp) && !cq_is_cjk_punct(cp)) {
            t[k++] = cp;
        }
        i = j;
    }
    return k;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The bigrams of a folded body (a lone token counts as one), sorted. */
static uint64_t *raw_bigrams(const char *norm, size_t *n_out, bool *failed) {
    uint64_t *tok;
    size_t nt = sim_tokens(norm, &tok);
    *n_out = 0;
    if (!tok) {
        *failed = true;
        return NULL;
    }
    size_t n = nt >= 2 ? nt - 1 : nt;
    uint64_t *bg = malloc((n + 1) * sizeof *bg);
    if (bg) {
        if (nt == 1) bg[0] = tok[0] * 0x9E3779B97F4A7C15ull;
        for (size_t i = 0; i + 1 < nt; i++) bg[i] = tok[i] * 0x9E3779B97F4A7C15ull + tok[i + 1];
        qsort(bg, n, sizeof *bg, cmp_u64);
        *n_out = n;
    } else {
        *failed = true;
    }
    free(tok);
    return bg;
}

static long number_of(const char *key) {
    if (!key) return 0;
    long v = 0;
    while (*key >= '0' && *key <= '9' && v < 1000000) v = v * 10 + (*key++ - '0');
    return v;
}

static void corpus_free(corpus *c) {
    for (size_t i = 0; c->bags && i < c->n_a + c->n_b; i++) {
        free(c->bags[i].bigrams);
        free(c->bags[i].norm);
    }
    free(c->bags);
    free(c->idf);
    free(c->scratch);
    memset(c, 0, sizeof *c);
}

/* Bags of the clauses of both sides, with idf weights over all of them. */
static cq_status corpus_make(const cq_cmp_clause *a, size_t n_a, const cq_cmp_clause *b, size_t n_b, corpus *c,
                             cq_err *err) {
    memset(c, 0, sizeof *c);
    size_t n = n_a + n_b;
    c->n_a = n_a;
    c->n_b = n_b;
    c->bags = calloc(n + 1, sizeof *c->bags);
    uint64_t **raw = calloc(n + 1, sizeof *raw);
    size_t *raw_n = calloc(n + 1, sizeof *raw_n);
    uint64_t *vocab = NULL;
    uint32_t *df = NULL;
    bool failed = !c->bags || !raw || !raw_n;
    size_t total = 0, longest = 0;
    for (size_t i = 0; !failed && i < n; i++) {
        const cq_cmp_clause *x = i < n_a ? &a[i] : &b[i - n_a];
        const char *body = body_of(x);
        c->bags[i].norm = cq_text_norm_key(body, strlen(body));
        c->bags[i].number = number_of(x->label_key);
        if (!c->bags[i].norm) failed = true;
        else raw[i] = raw_bigrams(c->bags[i].norm, &raw_n[i], &failed);
        total += raw_n[i];
        if (raw_n[i] > longest) longest = raw_n[i];
    }
    if (!failed) failed = !(vocab = malloc((total + 1) * sizeof *vocab));
    size_t nv = 0;
    if (!failed) {
        for (size_t i = 0; i < n; i++) {
            if (raw_n[i]) memcpy(vocab + nv, raw[i], raw_n[i] * sizeof *vocab);
            nv += raw_n[i];
        }
        qsort(vocab, nv, sizeof *vocab, cmp_u64);
        size_t u = 0;
        for (size_t i = 0; i < nv; i++)
            if (!u || vocab[u - 1] != vocab[i]) vocab[u++] = vocab[i];
        nv = u;
        df = calloc(nv + 1, sizeof *df);
        c->idf = malloc((nv + 1) * sizeof *c->idf);
        c->scratch = malloc((2 * longest + 2) * sizeof *c->scratch);
        failed = !df || !c->idf || !c->scratch;
    }
    for (size_t i = 0; !failed && i < n; i++) {
        clause_bag *g = &c->bags[i];
        g->bigrams = malloc((raw_n[i] + 1) * sizeof *g->bigrams);
        if (!g->bigrams) {
            failed = true;
            break;
        }
        for (size_t k = 0; k < raw_n[i]; k++) {
            uint32_t id = (uint32_t)((uint64_t *)bsearch(&raw[i][k], vocab, nv, sizeof *vocab, cmp_u64) - vocab);
            if (g->n && g->bigrams[g->n - 1].id == id) {
                g->bigrams[g->n - 1].count++;
            } else {
                g->bigrams[g->n++] = (bigram){id, 1};
                df[id]++;
            }
        }
    }
    if (!failed) {
        for (size_t v = 0; v < nv; v++) c->idf[v] = log(1.0 + (double)n / df[v]);
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < c->bags[i].n; k++)
                c->bags[i].weight += c->bags[i].bigrams[k].count * c->idf[c->bags[i].bigrams[k].id];
    }
    for (size_t i = 0; raw && i < n; i++) free(raw[i]);
    free(raw);
    free(raw_n);
    free(vocab);
    free(df);
    if (failed) {
        corpus_free(c);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    return CQ_OK;
}

/* Weighted Dice coefficient of two bags. */
static double dice(const corpus *c, const clause_bag *a, const clause_bag *b) {
    if (a->weight + b->weight <= 0) return 0;
    double inter = 0;
    size_t x = 0, y = 0;
    while (x < a->n && y < b->n) {
        const bigram *u = &a->bigrams[x], *v = &b->bigrams[y];
        if (u->id < v->id) x++;
        else if (u->id > v->id) y++;
        else {
            inter += (u->count < v->count ? u->count : v->count) * c->idf[u->id];
            x++;
            y++;
        }
    }
    return 2 * inter / (a->weight + b->weight);
}

static const clause_bag *bag_a(const corpus *c, size_t i) { return &c->bags[i]; }
static const clause_bag *bag_b(const corpus *c, size_t j) { return &c->bags[c->n_a + j]; }

static double sim(const corpus *c, size_t i, size_t j) {
    const clause_bag *x = bag_a(c, i), *y = bag_b(c, j);
    if (!x->n && !y->n) return strcmp(x->norm, y->norm) ? 0 : 1;
    return dice(c, x, y);
}

/* Similarity of one clause with two of the other side taken together (p and q). */
static double sim_with_two(corpus *c, const clause_bag *one, const clause_bag *p, const clause_bag *q) {
    size_t x = 0, y = 0, n = 0;
    while (x < p->n || y < q->n) {
        if (y >= q->n || (x < p->n && p->bigrams[x].id < q->bigrams[y].id)) {
            c->scratch[n++] = p->bigrams[x++];
        } else if (x >= p->n || q->bigrams[y].id < p->bigrams[x].id) {
            c->scratch[n++] = q->bigrams[y++];
        } else {
            c->scratch[n++] = (bigram){p->bigrams[x].id, p->bigrams[x].count + q->bigrams[y].count};
            x++;
            y++;
        }
    }
    const clause_bag both = {.bigrams = c->scratch, .n = n, .weight = p->weight + q->weight};
    return dice(c, one, &both);
}

/* Two adjacent clauses of one side with one of the other: a_i with b_j + b_(j+1) (two_b), or a_i + a_(i+1) with
 * b_j. */
static double sim2(corpus *c, size_t i, size_t j, bool two_b) {
    if (two_b) return sim_with_two(c, bag_a(c, i), bag_b(c, j), bag_b(c, j + 1));
    return sim_with_two(c, bag_b(c, j), bag_a(c, i), bag_a(c, i + 1));
}

/* How much of clause x's text (weighted) is found in clause y: |x ∩ y| / |x|. */
static double containment(const corpus *c, const clause_bag *x, const clause_bag *y) {
    if (x->weight <= 0) return 0;
    return dice(c, x, y) * (x->weight + y->weight) / (2 * x->weight);
}

double cq_text_similarity(const char *a, const char *b) {
    char *na = cq_text_norm_key(a, strlen(a)), *nb = cq_text_norm_key(b, strlen(b));
    size_t n_a = 0, n_b = 0;
    bool failed = !na || !nb;
    uint64_t *ba = failed ? NULL : raw_bigrams(na, &n_a, &failed), *bb = failed ? NULL : raw_bigrams(nb, &n_b, &failed);
    double s = 0;
    if (!failed && n_a + n_b) {
        size_t x = 0, y = 0, inter = 0;
        while (x < n_a && y < n_b) {
            if (ba[x] < bb[y]) x++;
            else if (ba[x] > bb[y]) y++;
            else inter++, x++, y++;
        }
        s = 2.0 * (double)inter / (double)(n_a + n_b);
    }
    free(na);
    free(nb);
    free(ba);
    free(bb);
    return s;
}

/* ---- alignment ------------------------------------------------------------------------------------------------ */

#define SPLIT_PENALTY 0.05 /* a split or merge must beat matching one part and leaving the other unmatched by this */
#define SPLIT_PROBE 0.2    /* a split is only tried where one of its parts alone is at least this similar */

/* A matched pair: a[i .. i + n_a) with b[j .. j + n_b), and possibly one more clause of a side that was merged
 * into it from elsewhere (extra_a, extra_b; -1: none). */
typedef struct {
    size_t i, n_a, j, n_b;
    double similarity;
    bool moved;
    long extra_a, extra_b;
} match;

typedef struct {
    match *m;
    size_t n, cap;
} match_list;

static bool match_push(match_list *l, match x) {
    if (!cq_grow((void **)&l->m, &l->cap, l->n + 1, sizeof *l->m)) return false;
    l->m[l->n++] = x;
    return true;
}

static int cmp_match_i(const void *a, const void *b) {
    const match *x = a, *y = b;
    return (x->i > y->i) - (x->i < y->i);
}

enum { BACK_NONE = 0, BACK_UP, BACK_LEFT, BACK_DIAG, BACK_SPLIT, BACK_MERGE };

/* A split or a merge (sim2's pair at i, j; s1, s2: its two parts' similarities alone) after the cell whose total is
 * before: kept as the cell's best (kind) when it beats it, and matching one part alone by SPLIT_PENALTY. */
static void try_two(corpus *c, double s1, double s2, size_t i, size_t j, bool two_b, double before, double threshold,
                    unsigned char kind, float *best, unsigned char *back) {
    if (s1 < SPLIT_PROBE && s2 < SPLIT_PROBE) return;
    const double s12 = sim2(c, i, j, two_b), alone = s1 > s2 ? s1 : s2;
    if (!(s12 >= threshold && s12 > alone + SPLIT_PENALTY)) return;
    const float v = (float)(before + s12 - threshold - SPLIT_PENALTY);
    if (v > *best) *best = v, *back = kind;
}

/* Order-preserving alignment of a[i0 .. i1) with b[j0 .. j1): the matches maximizing Σ (similarity − threshold),
 * appended to out. S holds the similarities of the whole problem (row-major, n_b wide). */
static cq_status align_region(corpus *c, const float *S, size_t i0, size_t i1, size_t j0, size_t j1, double threshold,
                              bool splits, match_list *out, cq_err *err) {
    size_t n = i1 - i0, m = j1 - j0, w = m + 1, nb = c->n_b;
    if (!n || !m) return CQ_OK;
    float *D = malloc((n + 1) * w * sizeof *D);
    unsigned char *B = malloc((n + 1) * w);
    cq_status rc = D && B ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i <= n; i++)
        for (size_t j = 0; j <= m; j++) {
            float best = 0;
            unsigned char back = BACK_NONE;
            if (i > 0) best = D[(i - 1) * w + j], back = BACK_UP;
            if (j > 0 && (back == BACK_NONE || D[i * w + j - 1] > best)) best = D[i * w + j - 1], back = BACK_LEFT;
            if (i > 0 && j > 0) {
                size_t ai = i0 + i - 1, bj = j0 + j - 1;
                double s = S[ai * nb + bj];
                if (s >= threshold) {
                    double bonus = bag_a(c, ai)->number && bag_a(c, ai)->number == bag_b(c, bj)->number
                                       ? CQ_ALIGN_SAME_NUMBER
                                       : 0;
                    float v = (float)(D[(i - 1) * w + j - 1] + s - threshold + bonus);
                    if (v > best) best = v, back = BACK_DIAG;
                }
                if (splits && j > 1) /* a_i split into b_(j-1) and b_j */
                    try_two(c, S[ai * nb + bj - 1], S[ai * nb + bj], ai, bj - 1, true, D[(i - 1) * w + j - 2],
                            threshold, BACK_SPLIT, &best, &back);
                if (splits && i > 1) /* a_(i-1) and a_i merged into b_j */
                    try_two(c, S[(ai - 1) * nb + bj], S[ai * nb + bj], ai - 1, bj, false, D[(i - 2) * w + j - 1],
                            threshold, BACK_MERGE, &best, &back);
            }
            D[i * w + j] = best;
            B[i * w + j] = back;
        }
    size_t first = out->n;
    for (size_t i = n, j = m; !rc && (i || j);) {
        unsigned char back = B[i * w + j];
        match x = {0};
        switch (back) {
        case BACK_UP: i--; continue;
        case BACK_LEFT: j--; continue;
        case BACK_DIAG: x = (match){i0 + i - 1, 1, j0 + j - 1, 1, S[(i0 + i - 1) * nb + j0 + j - 1], false, -1, -1}; i--, j--; break;
        case BACK_SPLIT: x = (match){i0 + i - 1, 1, j0 + j - 2, 2, sim2(c, i0 + i - 1, j0 + j - 2, true), false, -1, -1}; i--, j -= 2; break;
        case BACK_MERGE: x = (match){i0 + i - 2, 2, j0 + j - 1, 1, sim2(c, i0 + i - 2, j0 + j - 1, false), false, -1, -1}; i -= 2, j--; break;
        default: i = j = 0; continue;
        }
        if (!match_push(out, x)) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    /* backtracking found them last first */
    for (size_t a = first, b = out->n; !rc && b > a + 1; a++, b--) {
        match t = out->m[a];
        out->m[a] = out->m[b - 1];
        out->m[b - 1] = t;
    }
    free(D);
    free(B);
    return rc;
}

static void pair_kind(const corpus *c, const cq_cmp_clause *a, const cq_cmp_clause *b, const match *x, cq_cmp_pair *p) {
    p->n_a = x->n_a;
    p->n_b = x->n_b;
    for (size_t k = 0; k < x->n_a; k++) p->a[k] = x->i + k;
    for (size_t k = 0; k < x->n_b; k++) p->b[k] = x->j + k;
    if (x->extra_a >= 0) p->a[p->n_a++] = (size_t)x->extra_a;
    if (x->extra_b >= 0) p->b[p->n_b++] = (size_t)x->extra_b;
    if (p->n_a == 2 && p->a[1] < p->a[0]) p->a[0] = p->a[1], p->a[1] = x->i; /* in document order */
    if (p->n_b == 2 && p->b[1] < p->b[0]) p->b[0] = p->b[1], p->b[1] = x->j;
    p->similarity = x->similarity > 1 ? 1 : x->similarity;
    p->moved = x->moved;
    bool same = p->n_a == 1 && p->n_b == 1 && !strcmp(bag_a(c, x->i)->norm, bag_b(c, x->j)->norm);
    p->kind = same ? CQ_PAIR_SAME : CQ_PAIR_CHANGED;
    if (same) p->similarity = 1;
    const char *la = a[x->i].label_key, *lb = b[x->j].label_key;
    p->renumbered = p->n_a == 1 && p->n_b == 1 && la && lb && strcmp(la, lb);
}

/* The body of one or two clauses, joined by a line break. */
static char *joined_body(const cq_cmp_clause *side, const size_t *idx, size_t n) {
    cq_strbuf s = {0};
    for (size_t k = 0; k < n; k++) {
        if (k) cq_strbuf_puts(&s, "\n");
        cq_strbuf_puts(&s, body_of(&side[idx[k]]));
    }
    return cq_strbuf_finish(&s);
}

void cq_alignment_free(cq_alignment *al) {
    for (size_t i = 0; al->pairs && i < al->n_pairs; i++) cq_diff_free(&al->pairs[i].diff);
    free(al->pairs);
    memset(al, 0, sizeof *al);
}

cq_status cq_align_clauses(const cq_cmp_clause *a, size_t n_a, const cq_cmp_clause *b, size_t n_b, cq_alignment *out,
                           cq_err *err) {
    memset(out, 0, sizeof *out);
    if ((double)n_a * (double)n_b > CQ_ALIGN_MAX_CELLS)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "the documents are too long to compare (%zu × %zu clauses)", n_a,
                          n_b);
    corpus c;
    cq_status rc = corpus_make(a, n_a, b, n_b, &c, err);
    if (rc) return rc;
    float *S = malloc((n_a * n_b + 1) * sizeof *S);
    match_list chain = {0}, extra = {0};
    bool *used_a = calloc(n_a + 1, 1), *used_b = calloc(n_b + 1, 1);
    if (!S || !used_a || !used_b) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n_a; i++)
        for (size_t j = 0; j < n_b; j++) S[i * n_b + j] = (float)sim(&c, i, j);
    /* pass 1: the whole documents */
    if (!rc) rc = align_region(&c, S, 0, n_a, 0, n_b, CQ_ALIGN_MATCH, true, &chain, err);
    for (size_t k = 0; !rc && k < chain.n; k++) {
        for (size_t x = 0; x < chain.m[k].n_a; x++) used_a[chain.m[k].i + x] = true;
        for (size_t x = 0; x < chain.m[k].n_b; x++) used_b[chain.m[k].j + x] = true;
    }
    /* pass 2: clauses moved elsewhere — the most similar unmatched pairs, out of order. Before the gaps are
     * aligned with a lower bar, so that a clause moved to another chapter is not paired with a stranger that
     * happens to stand in its old place. */
    match_list moved = {0};
    while (!rc) {
        double best = CQ_ALIGN_MOVED;
        size_t bi = 0, bj = 0;
        bool found = false;
        for (size_t i = 0; i < n_a; i++) {
            if (used_a[i]) continue;
            for (size_t j = 0; j < n_b; j++)
                if (!used_b[j] && S[i * n_b + j] >= best) best = S[i * n_b + j], bi = i, bj = j, found = true;
        }
        if (!found) break;
        used_a[bi] = used_b[bj] = true;
        for (size_t j = 0; j < n_b; j++) S[bi * n_b + j] = 0; /* out of the gaps' reach */
        for (size_t i = 0; i < n_a; i++) S[i * n_b + bj] = 0;
        if (!match_push(&moved, (match){bi, 1, bj, 1, best, true, -1, -1}))
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    /* pass 3: each gap between two ordered matches (and before the first, after the last), with a lower bar */
    size_t pi = 0, pj = 0;
    for (size_t k = 0; !rc && k <= chain.n; k++) {
        size_t ni = k < chain.n ? chain.m[k].i : n_a, nj = k < chain.n ? chain.m[k].j : n_b;
        rc = align_region(&c, S, pi, ni, pj, nj, CQ_ALIGN_GAP_MATCH, false, &extra, err);
        if (k < chain.n) {
            pi = chain.m[k].i + chain.m[k].n_a;
            pj = chain.m[k].j + chain.m[k].n_b;
        }
    }
    for (size_t k = 0; !rc && k < extra.n; k++) {
        used_a[extra.m[k].i] = used_b[extra.m[k].j] = true;
        if (!match_push(&chain, extra.m[k])) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    if (!rc && chain.n) qsort(chain.m, chain.n, sizeof *chain.m, cmp_match_i);
    /* the ordered matches first, then the moved ones */
    size_t n_ordered = chain.n;
    for (size_t k = 0; !rc && k < moved.n; k++)
        if (!match_push(&chain, moved.m[k])) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    free(moved.m);
    /* pass 4: a clause left over whose text is mostly inside a matched clause of the other side was merged into it
     * (or split off it): it joins that pair when that makes the pair more alike */
    bool *absorbed_a = calloc(n_a + 1, 1), *absorbed_b = calloc(n_b + 1, 1);
    if (!rc && (!absorbed_a || !absorbed_b)) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (int side = 0; !rc && side < 2; side++) {
        size_t n_left = side ? n_b : n_a;
        bool *used = side ? used_b : used_a, *absorbed = side ? absorbed_b : absorbed_a;
        for (size_t x = 0; x < n_left; x++) {
            if (used[x]) continue;
            const clause_bag *left = side ? bag_b(&c, x) : bag_a(&c, x);
            size_t best_m = chain.n;
            double best = CQ_ALIGN_ABSORBED;
            for (size_t k = 0; k < chain.n; k++) {
                const match *m = &chain.m[k];
                if (m->n_a != 1 || m->n_b != 1 || m->extra_a >= 0 || m->extra_b >= 0) continue; /* 1:1 pairs only */
                const clause_bag *host = side ? bag_a(&c, m->i) : bag_b(&c, m->j);
                double in = containment(&c, left, host);
                if (in >= best) best = in, best_m = k;
            }
            if (best_m == chain.n) continue;
            match *m = &chain.m[best_m];
            const clause_bag *host = side ? bag_a(&c, m->i) : bag_b(&c, m->j);
            const clause_bag *partner = side ? bag_b(&c, m->j) : bag_a(&c, m->i); /* the pair's clause on left's side */
            double joined = sim_with_two(&c, host, partner, left);
            if (joined <= m->similarity) continue;
            m->similarity = joined;
            if (side) m->extra_b = (long)x;
            else m->extra_a = (long)x;
            used[x] = absorbed[x] = true;
        }
    }
    /* the pairs in b's order: before each ordered match, the removed clauses of a up to it, then b's clauses up to
     * it (added, or moved here) */
    size_t cap = n_a + n_b + 1;
    if (!rc && !(out->pairs = calloc(cap, sizeof *out->pairs))) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    size_t ia = 0, jb = 0;
    for (size_t k = 0; !rc && k <= n_ordered; k++) {
        size_t ni = k < n_ordered ? chain.m[k].i : n_a, nj = k < n_ordered ? chain.m[k].j : n_b;
        for (; ia < ni; ia++) {
            bool moved = absorbed_a[ia];
            for (size_t x = n_ordered; x < chain.n; x++) moved |= chain.m[x].i == ia;
            if (!moved) out->pairs[out->n_pairs++] = (cq_cmp_pair){.kind = CQ_PAIR_REMOVED, .a = {ia}, .n_a = 1};
        }
        for (; jb < nj; jb++) {
            if (absorbed_b[jb]) continue;
            size_t x = n_ordered;
            while (x < chain.n && chain.m[x].j != jb) x++;
            cq_cmp_pair *p = &out->pairs[out->n_pairs++];
            if (x < chain.n) pair_kind(&c, a, b, &chain.m[x], p);
            else *p = (cq_cmp_pair){.kind = CQ_PAIR_ADDED, .b = {jb}, .n_b = 1};
        }
        if (k < n_ordered) {
            pair_kind(&c, a, b, &chain.m[k], &out->pairs[out->n_pairs++]);
            ia = chain.m[k].i + chain.m[k].n_a;
            jb = chain.m[k].j + chain.m[k].n_b;
        }
    }
    for (size_t k = 0; !rc && k < out->n_pairs; k++) {
        cq_cmp_pair *p = &out->pairs[k];
        size_t *const count[] = {&out->n_same, &out->n_changed, &out->n_added, &out->n_removed}; /* by kind */
        (*count[p->kind])++;
        /* a renumbered clause that also changed is a changed one (n_renumbered counts only the unchanged) */
        out->n_renumbered += p->renumbered && p->kind == CQ_PAIR_SAME;
        out->n_renumbered_changed += p->renumbered && p->kind == CQ_PAIR_CHANGED;
        if (p->kind != CQ_PAIR_CHANGED) continue;
        char *ta = joined_body(a, p->a, p->n_a), *tb = joined_body(b, p->b, p->n_b);
        rc = ta && tb ? cq_diff_texts(ta, tb, &p->diff, err) : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        free(ta);
        free(tb);
    }
    free(S);
    free(used_a);
    free(used_b);
    free(absorbed_a);
    free(absorbed_b);
    free(chain.m);
    free(extra.m);
    corpus_free(&c);
    if (rc) cq_alignment_free(out);
    return rc;
}

/* ---- diff ----------------------------------------------------------------------------------------------------- */

#define DIFF_MAX_D 3000 /* edits beyond this: the whole text is one replacement */

typedef enum { OP_EQ = 0, OP_DEL, OP_INS } edit_op;

/* Myers' greedy diff of token sequences: the edit script, one op per token (an equal pair counts once). */
static cq_status myers(const token *ta, size_t n, const token *tb, size_t m, unsigned char **ops_out, size_t *n_ops,
                       bool *gave_up, cq_err *err) {
    *ops_out = NULL;
    *n_ops = 0;
    *gave_up = false;
    long max = (long)(n + m), off = max + 1;
    long *V = calloc((size_t)(2 * max + 3), sizeof *V);
    long *trace = NULL; /* V's diagonals -d .. d after step d, at d * d */
    size_t cap_trace = 0;
    if (!V) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    long D = -1;
    cq_status rc = CQ_OK;
    for (long d = 0; d <= max && d <= DIFF_MAX_D && D < 0; d++) {
        for (long k = -d; k <= d; k += 2) {
            long x = (k == -d || (k != d && V[off + k - 1] < V[off + k + 1])) ? V[off + k + 1] : V[off + k - 1] + 1;
            long y = x - k;
            while (x < (long)n && y < (long)m && ta[x].id == tb[y].id) x++, y++;
            V[off + k] = x;
            if (x >= (long)n && y >= (long)m) {
                D = d;
                break;
            }
        }
        if (!cq_grow((void **)&trace, &cap_trace, (size_t)((d + 1) * (d + 1)), sizeof *trace)) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
        memcpy(trace + d * d, V + off - d, (size_t)(2 * d + 1) * sizeof *trace);
    }
    if (!rc && D < 0) {
        *gave_up = true;
    } else if (!rc) {
        unsigned char *ops = malloc(n + m + 1);
        if (!ops) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        size_t at = n + m; /* the script comes last op first: written from the end (an op takes a token or two) */
        long x = (long)n, y = (long)m;
        for (long d = D; !rc && d > 0; d--) {
            const long *prev = trace + (d - 1) * (d - 1); /* index k: prev[k + d - 1] */
            long k = x - y;
            bool down = k == -d || (k != d && prev[k - 1 + d - 1] < prev[k + 1 + d - 1]);
            long pk = down ? k + 1 : k - 1;
            long px = prev[pk + d - 1], py = px - pk;
            for (; x > px && y > py; x--, y--) ops[--at] = OP_EQ;
            ops[--at] = down ? OP_INS : OP_DEL; /* the edit from (px, py) */
            x = px;
            y = py;
        }
        for (; !rc && x > 0 && y > 0; x--, y--) ops[--at] = OP_EQ;
        if (rc) {
            free(ops);
        } else {
            *n_ops = n + m - at;
            memmove(ops, ops + at, *n_ops);
            *ops_out = ops;
        }
    }
    free(trace);
    free(V);
    return rc;
}

/* A diff being built: equal runs and change regions (what was deleted, what was inserted), alternating. */
typedef struct {
    cq_strbuf eq, del, ins; /* a region: eq is its leading equal run, then its deletion and insertion */
} region;

typedef struct {
    region *r;
    size_t n, cap;
} region_list;

static region *region_new(region_list *l) {
    if (!cq_grow((void **)&l->r, &l->cap, l->n + 1, sizeof *l->r)) return NULL;
    region *x = &l->r[l->n++];
    memset(x, 0, sizeof *x);
    return x;
}

static size_t chars(const cq_strbuf *b) { return b->data ? cq_utf8_count(b->data, b->len) : 0; }

static void region_free(region *r) {
    cq_strbuf_free(&r->eq);
    cq_strbuf_free(&r->del);
    cq_strbuf_free(&r->ins);
}

static void region_list_free(region_list *l) {
    for (size_t i = 0; i < l->n; i++) region_free(&l->r[i]);
    free(l->r);
}

/* diff-match-patch's semantic clean-up: an equal run between two changes, no longer than the larger side of each
 * of them, is folded into both (it reads as part of one rewrite, not as a kept piece). */
static void cleanup_semantic(region_list *l) {
    bool changed = true;
    while (changed) {
        changed = false;
        for (size_t i = 1; i < l->n; i++) {
            region *p = &l->r[i - 1], *q = &l->r[i];
            size_t e = chars(&q->eq);
            if (!e) continue;
            size_t p_del = chars(&p->del), p_ins = chars(&p->ins), q_del = chars(&q->del), q_ins = chars(&q->ins);
            bool p_change = p_del || p_ins, q_change = q_del || q_ins;
            if (!p_change || !q_change) continue;
            size_t p_big = p_del > p_ins ? p_del : p_ins, q_big = q_del > q_ins ? q_del : q_ins;
            if (e > p_big || e > q_big) continue;
            /* p.del + q.eq + q.del, p.ins + q.eq + q.ins; q's region merges into p */
            cq_strbuf_append(&p->del, q->eq.data, q->eq.len);
            cq_strbuf_append(&p->ins, q->eq.data, q->eq.len);
            if (q->del.data) cq_strbuf_append(&p->del, q->del.data, q->del.len);
            if (q->ins.data) cq_strbuf_append(&p->ins, q->ins.data, q->ins.len);
            region_free(q);
            memmove(q, q + 1, (l->n - i - 1) * sizeof *q);
            l->n--;
            changed = true;
            break;
        }
    }
}

static bool push_span(cq_diff *d, size_t *cap, cq_diff_op op, const cq_strbuf *b) {
    if (!b->data || !b->len) return true;
    if (!cq_grow((void **)&d->spans, cap, d->n + 1, sizeof *d->spans)) return false;
    char *t = strndup(b->data, b->len);
    if (!t) return false;
    d->spans[d->n++] = (cq_diff_span){op, t};
    return true;
}

void cq_diff_free(cq_diff *d) {
    for (size_t i = 0; d->spans && i < d->n; i++) free(d->spans[i].text);
    free(d->spans);
    memset(d, 0, sizeof *d);
}

cq_status cq_diff_texts(const char *a, const char *b, cq_diff *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    token *ta = NULL, *tb = NULL;
    size_t n = tokenize(a, &ta), m = tokenize(b, &tb);
    unsigned char *ops = NULL;
    size_t n_ops = 0;
    bool gave_up = false;
    cq_status rc = ta && tb ? myers(ta, n, tb, m, &ops, &n_ops, &gave_up, err)
                            : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    region_list l = {0};
    region *cur = rc ? NULL : region_new(&l);
    if (!rc && !cur) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc && gave_up) {
        cq_strbuf_puts(&cur->del, a);
        cq_strbuf_puts(&cur->ins, b);
    }
    size_t x = 0, y = 0;
    for (size_t k = 0; !rc && k < n_ops; k++) {
        if (ops[k] == OP_EQ) {
            /* an equal run after a change starts the next region */
            if ((cur->del.len || cur->ins.len) && !(cur = region_new(&l))) {
                rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
                break;
            }
            cq_strbuf_append(&cur->eq, a + ta[x].start, ta[x].end - ta[x].start);
            x++, y++;
        } else if (ops[k] == OP_DEL) {
            cq_strbuf_append(&cur->del, a + ta[x].start, ta[x].end - ta[x].start);
            x++;
        } else {
            cq_strbuf_append(&cur->ins, b + tb[y].start, tb[y].end - tb[y].start);
            y++;
        }
    }
    if (!rc) cleanup_semantic(&l);
    size_t cap = 0;
    for (size_t i = 0; !rc && i < l.n; i++) {
        region *r = &l.r[i];
        if (r->eq.failed || r->del.failed || r->ins.failed || !push_span(out, &cap, CQ_DIFF_EQUAL, &r->eq) ||
            !push_span(out, &cap, CQ_DIFF_DELETE, &r->del) || !push_span(out, &cap, CQ_DIFF_INSERT, &r->ins))
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    region_list_free(&l);
    free(ops);
    free(ta);
    free(tb);
    if (rc) cq_diff_free(out);
    return rc;
}

/* Up to max_chars characters of s, "…" when cut. */
static void put_quote(cq_strbuf *b, const char *s, size_t max_chars, bool zh) {
    cq_strbuf_puts(b, zh ? "“" : "\"");
    size_t i = 0, n = strlen(s), k = 0;
    while (i < n && k < max_chars) {
        size_t len;
        uint32_t cp = cq_utf8_decode(s + i, n - i, &len);
        cq_strbuf_put_cp(b, cp == '\n' ? ' ' : cp);
        i += len ? len : 1;
        k++;
    }
    if (i < n) cq_strbuf_puts(b, "…");
    cq_strbuf_puts(b, zh ? "”" : "\"");
}

#define DESCRIBE_MAX_CHANGES 6

char *cq_diff_describe(const cq_diff *d, bool zh, size_t max_chars) {
    cq_strbuf b = {0};
    size_t changes = 0;
    for (size_t i = 0; i < d->n; i++) {
        const cq_diff_span *s = &d->spans[i];
        if (s->op == CQ_DIFF_EQUAL) continue;
        const cq_diff_span *next = i + 1 < d->n ? &d->spans[i + 1] : NULL;
        bool replace = s->op == CQ_DIFF_DELETE && next && next->op == CQ_DIFF_INSERT;
        if (++changes > DESCRIBE_MAX_CHANGES) {
            if (replace) i++;
            continue;
        }
        if (changes > 1) cq_strbuf_puts(&b, zh ? "；" : "; ");
        if (replace) {
            cq_strbuf_puts(&b, zh ? "将" : "replaced ");
            put_quote(&b, s->text, max_chars, zh);
            cq_strbuf_puts(&b, zh ? "改为" : " with ");
            put_quote(&b, next->text, max_chars, zh);
            i++;
        } else {
            cq_strbuf_puts(&b, s->op == CQ_DIFF_DELETE ? (zh ? "删去" : "deleted ") : (zh ? "增加" : "added "));
            put_quote(&b, s->text, max_chars, zh);
        }
    }
    if (changes > DESCRIBE_MAX_CHANGES)
        cq_strbuf_printf(&b, zh ? "等，共%zu处修改" : "; %zu changes in all", changes);
    if (!changes) cq_strbuf_puts(&b, zh ? "文字未变" : "no change in wording");
    return cq_strbuf_finish(&b);
}

/* ---- two documents of the store ------------------------------------------------------------------------------- */

/* What cq_compare_docs's clauses own. */
static void clause_free(cq_cmp_clause *c) {
    free((char *)c->label);
    free((char *)c->label_key);
    free((char *)c->path);
    free((char *)c->text);
}

void cq_comparison_free(cq_comparison *c) {
    for (size_t i = 0; c->a && i < c->n_a; i++) clause_free(&c->a[i]);
    for (size_t i = 0; c->b && i < c->n_b; i++) clause_free(&c->b[i]);
    free(c->a);
    free(c->b);
    cq_alignment_free(&c->al);
    memset(c, 0, sizeof *c);
}

/* The clauses of a document in order (store/documents.c), with their kinds. */
static cq_status load_clauses(cq_store *s, int64_t doc_id, cq_cmp_clause **out, size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    cq_clause_row *rows = NULL;
    size_t n_rows = 0;
    cq_status rc = cq_store_doc_clauses(s, doc_id, &rows, &n_rows, err);
    if (rc) return cq_err_prefix(err, "compare: ");
    if (n_rows && !(*out = calloc(n_rows, sizeof **out))) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n_rows; i++) {
        if (!rc) {
            (*out)[i] = (cq_cmp_clause){rows[i].id, rows[i].label, rows[i].label_key, rows[i].path, rows[i].text,
                                        rows[i].kind};
            rows[i].label = rows[i].label_key = rows[i].path = rows[i].text = NULL; /* the clause owns them now */
            *n = i + 1;
        }
        cq_clause_row_free(&rows[i]);
    }
    free(rows);
    return rc;
}

static bool has_articles(const cq_cmp_clause *c, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (c[i].kind == 1) return true; /* reader/reader.h's CQ_CLAUSE_ARTICLE */
    return false;
}

static void keep_articles(cq_cmp_clause *c, size_t *n) {
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        if (c[i].kind == 1) c[k++] = c[i];
        else clause_free(&c[i]);
    }
    *n = k;
}

cq_status cq_compare_docs(cq_store *s, int64_t doc_a, int64_t doc_b, cq_comparison *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    out->doc_a = doc_a;
    out->doc_b = doc_b;
    cq_status rc = load_clauses(s, doc_a, &out->a, &out->n_a, err);
    if (!rc) rc = load_clauses(s, doc_b, &out->b, &out->n_b, err);
    if (!rc && has_articles(out->a, out->n_a) && has_articles(out->b, out->n_b)) {
        keep_articles(out->a, &out->n_a);
        keep_articles(out->b, &out->n_b);
    }
    if (!rc) rc = cq_align_clauses(out->a, out->n_a, out->b, out->n_b, &out->al, err);
    if (rc) cq_comparison_free(out);
    return rc;
}

bool cq_cmp_pair_holds(const cq_comparison *c, const cq_cmp_pair *p, const char *key, int64_t clause_id) {
    for (int side = 0; side < 2; side++) {
        const cq_cmp_clause *cl = side ? c->b : c->a;
        const size_t *idx = side ? p->b : p->a;
        size_t n = side ? p->n_b : p->n_a;
        for (size_t k = 0; k < n; k++) {
            const cq_cmp_clause *x = &cl[idx[k]];
            if (clause_id && x->clause_id == clause_id) return true;
            if (key && x->label_key && !strcmp(x->label_key, key)) return true;
        }
    }
    return false;
}

const cq_cmp_pair *cq_comparison_pair_of(const cq_comparison *c, int64_t clause_id) {
    for (size_t k = 0; k < c->al.n_pairs; k++)
        if (cq_cmp_pair_holds(c, &c->al.pairs[k], NULL, clause_id)) return &c->al.pairs[k];
    return NULL;
}

void cq_compare_clause_key(const char *arg, char *key, size_t cap) {
    cq_clause_ref ref;
    char q[256];
    bool di = !strncmp(arg, "第", 3), tiao = strstr(arg, "条") != NULL;
    bool number = arg[0] >= '0' && arg[0] <= '9';
    for (const char *p = arg; number && *p; p++) number = (*p >= '0' && *p <= '9') || *p == '-' || *p == '.';
    if (number) {
        snprintf(key, cap, "%s", arg);
        return;
    }
    snprintf(q, sizeof q, "%s%s%s", di ? "" : "第", arg, tiao ? "" : "条");
    if (cq_router_parse(q, &ref) && ref.key[0]) snprintf(key, cap, "%s", ref.key);
    else snprintf(key, cap, "%s", arg);
}
