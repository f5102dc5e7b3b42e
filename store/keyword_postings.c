/* The PostgreSQL store's keyword index in memory: building a document's postings, and BM25 over postings read back.
 * Formats and rules in keyword_postings.h; the score is store/bm25.h's, FTS5's. */
#include "store/keyword_postings.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/strbuf.h"

#include "store/bm25.h"
#include "store/fts_cjk.h"
#include "store/strmap.h"

/* ---- varints (bytes grow in a cq_strbuf) ------------------------------------------------------------------- */

static void put_varint(cq_strbuf *b, uint64_t v) {
    char out[10];
    size_t n = 0;
    do {
        unsigned char c = v & 0x7f;
        v >>= 7;
        out[n++] = (char)(c | (v ? 0x80 : 0));
    } while (v);
    cq_strbuf_append(b, out, n);
}

/* Reads one varint at *p (< end); false when the bytes end first or it is too long. */
static bool get_varint(const unsigned char **p, const unsigned char *end, uint64_t *v) {
    uint64_t x = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        unsigned char c = *(*p)++;
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* ---- building a document's rows --------------------------------------------------------------------------- */

typedef struct {
    uint32_t token, column, position;
} occurrence;

/* A token's postings so far. */
typedef struct {
    cq_strbuf list;
    int64_t last_clause; /* the last clause id written (0 none) */
    int n_clauses;
} token_list;

typedef struct {
    cq_strmap tokens;
    token_list *lists; /* per token */
    size_t cap_lists;
    occurrence *occ;       /* the current clause's occurrences */
    size_t n_occ, cap_occ;
    uint32_t column, positions; /* the column being tokenized and its positions so far */
    bool failed;
} doc_builder;

static int builder_token(void *ctx, const char *tok, size_t len, size_t start, size_t end, unsigned flags) {
    (void)start, (void)end;
    doc_builder *b = ctx;
    /* FTS5's counting: a token starts a new position unless it is COLOCATED with the one before it. */
    if (!(flags & CQ_FTS_TOK_COLOCATED) || b->positions == 0) b->positions++;
    long t = cq_strmap_find(&b->tokens, tok, len, true);
    const size_t had = b->cap_lists;
    bool ok = t >= 0 && cq_grow((void **)&b->lists, &b->cap_lists, (size_t)t + 1, sizeof *b->lists);
    if (ok) memset(b->lists + had, 0, (b->cap_lists - had) * sizeof *b->lists); /* new tokens' lists start empty */
    if (!ok || !cq_grow((void **)&b->occ, &b->cap_occ, b->n_occ + 1, sizeof *b->occ)) {
        b->failed = true;
        return 1;
    }
    b->occ[b->n_occ++] = (occurrence){(uint32_t)t, b->column, b->positions - 1};
    return 0;
}

static int cmp_occurrence(const void *a, const void *b) {
    const occurrence *x = a, *y = b;
    if (x->token != y->token) return x->token < y->token ? -1 : 1;
    if (x->column != y->column) return x->column < y->column ? -1 : 1;
    return (x->position > y->position) - (x->position < y->position);
}

/* Appends clause `id`'s occurrences (b->occ, D positions) to its tokens' lists. */
static void builder_flush_clause(doc_builder *b, int64_t id, uint32_t D) {
    qsort(b->occ, b->n_occ, sizeof *b->occ, cmp_occurrence);
    for (size_t i = 0; i < b->n_occ;) {
        uint32_t t = b->occ[i].token;
        token_list *l = &b->lists[t];
        cq_strbuf *out = &l->list;
        put_varint(out, (uint64_t)(id - l->last_clause));
        put_varint(out, D);
        l->last_clause = id;
        l->n_clauses++;
        for (uint32_t col = 0; col < CQ_BM25_N_COLUMNS; col++) {
            size_t j = i, n = 0;
            uint32_t prev = UINT32_MAX;
            for (; j < b->n_occ && b->occ[j].token == t && b->occ[j].column == col; j++) {
                n += b->occ[j].position != prev;
                prev = b->occ[j].position;
            }
            put_varint(out, n);
            prev = UINT32_MAX;
            uint32_t last = 0;
            for (size_t k = i; k < j; k++) {
                if (b->occ[k].position == prev) continue; /* one token twice at one position is one occurrence */
                prev = b->occ[k].position;
                put_varint(out, prev - last);
                last = prev;
            }
            i = j;
        }
        if (out->failed) b->failed = true;
    }
    b->n_occ = 0;
}

static int cmp_row(const void *a, const void *b) {
    return strcmp(((const cq_keyword_row *)a)->token, ((const cq_keyword_row *)b)->token);
}

cq_status cq_keyword_doc_build(const cq_keyword_clause *c, size_t n, cq_keyword_doc *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    doc_builder b = {0};
    cq_status rc = CQ_OK;
    for (size_t i = 0; i < n && !b.failed && !rc; i++) {
        if (i && c[i].clause_id <= c[i - 1].clause_id) {
            rc = cq_err_set(err, CQ_ERR_INVALID, "keyword index: clause ids must increase (%lld after %lld)",
                            (long long)c[i].clause_id, (long long)c[i - 1].clause_id);
            break;
        }
        const char *columns[CQ_BM25_N_COLUMNS] = {c[i].title, c[i].path, c[i].body};
        uint32_t D = 0;
        for (uint32_t col = 0; col < CQ_BM25_N_COLUMNS && !b.failed; col++) {
            const char *text = columns[col] ? columns[col] : "";
            b.column = col;
            b.positions = 0;
            cq_fts_cjk_tokenize(text, strlen(text), CQ_FTS_CJK_DOCUMENT, builder_token, &b);
            D += b.positions;
        }
        if (!b.failed) builder_flush_clause(&b, c[i].clause_id, D);
        out->n_clauses++;
        out->n_positions += D;
    }
    free(b.occ);
    if (!rc && !b.failed) out->rows = calloc(b.tokens.n ? b.tokens.n : 1, sizeof *out->rows);
    if (!rc && !out->rows) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (rc) {
        for (size_t t = 0; t < b.cap_lists; t++) free(b.lists[t].list.data);
        cq_strmap_free(&b.tokens, false);
        free(b.lists);
        memset(out, 0, sizeof *out);
        return rc;
    }
    for (size_t t = 0; t < b.tokens.n; t++)
        out->rows[t] = (cq_keyword_row){b.tokens.keys[t], b.lists[t].n_clauses,
                                        (unsigned char *)b.lists[t].list.data, b.lists[t].list.len};
    out->n = b.tokens.n;
    qsort(out->rows, out->n, sizeof *out->rows, cmp_row);
    cq_strmap_free(&b.tokens, true); /* the rows own the strings and the lists now */
    free(b.lists);
    return CQ_OK;
}

void cq_keyword_doc_free(cq_keyword_doc *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) {
        free(d->rows[i].token);
        free(d->rows[i].postings);
    }
    free(d->rows);
    memset(d, 0, sizeof *d);
}

/* ---- searching ---------------------------------------------------------------------------------------------- */

typedef struct {
    uint32_t *tokens; /* indexes into the token table, in phrase order */
    size_t n;
} phrase;

typedef struct {
    uint32_t token;
    int64_t doc_id;
    size_t offset, bytes; /* in the search's arena */
} stored_row;

struct cq_keyword_search {
    cq_strmap tokens;
    phrase *phrases;
    size_t n_phrases;
    stored_row *rows;
    size_t n_rows, cap_rows;
    cq_strbuf arena;
};

typedef struct {
    phrase *p;
    cq_strmap *tokens;
    bool failed;
} phrase_ctx;

static int phrase_token(void *ctx, const char *tok, size_t len, size_t start, size_t end, unsigned flags) {
    (void)start, (void)end, (void)flags; /* a query's tail unigram is one more token of the phrase, as FTS5 reads it */
    phrase_ctx *x = ctx;
    long t = cq_strmap_find(x->tokens, tok, len, true);
    uint32_t *p = t < 0 ? NULL : realloc(x->p->tokens, (x->p->n + 1) * sizeof *p);
    if (!p) {
        x->failed = true;
        return 1;
    }
    x->p->tokens = p;
    x->p->tokens[x->p->n++] = (uint32_t)t;
    return 0;
}

cq_status cq_keyword_search_new(const char *const *terms, size_t n_terms, cq_keyword_search **out, cq_err *err) {
    *out = NULL;
    cq_keyword_search *s = calloc(1, sizeof *s);
    bool failed = !s || !(s->phrases = calloc(n_terms ? n_terms : 1, sizeof *s->phrases));
    for (size_t i = 0; !failed && i < n_terms; i++) {
        phrase_ctx x = {&s->phrases[s->n_phrases], &s->tokens, false};
        cq_fts_cjk_tokenize(terms[i], strlen(terms[i]), CQ_FTS_CJK_QUERY, phrase_token, &x);
        failed = x.failed;
        /* a term without tokens matches nothing and adds nothing to a score (a failed one is kept to be freed) */
        if (x.p->n || failed) s->n_phrases++;
    }
    if (failed) {
        cq_keyword_search_free(s);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    *out = s;
    return CQ_OK;
}

void cq_keyword_search_free(cq_keyword_search *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_phrases; i++) free(s->phrases[i].tokens);
    free(s->phrases);
    cq_strmap_free(&s->tokens, false);
    free(s->rows);
    cq_strbuf_free(&s->arena);
    free(s);
}

size_t cq_keyword_search_tokens(const cq_keyword_search *s, const char *const **tokens) {
    *tokens = (const char *const *)s->tokens.keys;
    return s->tokens.n;
}

cq_status cq_keyword_search_add(cq_keyword_search *s, const char *token, int64_t doc_id, const unsigned char *postings,
                                size_t postings_bytes, cq_err *err) {
    long t = cq_strmap_find(&s->tokens, token, strlen(token), false);
    if (t < 0) return cq_err_set(err, CQ_ERR_INTERNAL, "keyword index: a row for a token the search did not ask for");
    if (!cq_grow((void **)&s->rows, &s->cap_rows, s->n_rows + 1, sizeof *s->rows))
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    const size_t offset = s->arena.len;
    cq_strbuf_append(&s->arena, (const char *)postings, postings_bytes);
    if (s->arena.failed) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    s->rows[s->n_rows++] = (stored_row){(uint32_t)t, doc_id, offset, postings_bytes};
    return CQ_OK;
}

/* One clause of a decoded postings list. */
typedef struct {
    int64_t id;
    uint32_t positions;                 /* D */
    uint32_t count[CQ_BM25_N_COLUMNS];  /* occurrences per column */
    uint32_t first[CQ_BM25_N_COLUMNS];  /* where they start in the decoded positions */
} entry;

typedef struct {
    entry *e;
    size_t n, cap;
    uint32_t *pos; /* absolute positions, when asked for */
    size_t n_pos, cap_pos;
} decoded;

/* Decodes one postings list into d (emptied first); positions only when with_positions. */
static cq_status decode(const unsigned char *p, size_t len, bool with_positions, decoded *d, cq_err *err) {
    const unsigned char *end = p + len;
    d->n = d->n_pos = 0;
    int64_t id = 0;
    while (p < end) {
        uint64_t delta, D;
        if (!get_varint(&p, end, &delta) || !get_varint(&p, end, &D)) goto corrupt;
        if (!cq_grow((void **)&d->e, &d->cap, d->n + 1, sizeof *d->e))
            return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        entry *e = &d->e[d->n++];
        id += (int64_t)delta;
        e->id = id;
        e->positions = (uint32_t)D;
        for (int col = 0; col < CQ_BM25_N_COLUMNS; col++) {
            uint64_t count, at = 0;
            if (!get_varint(&p, end, &count) || count > len) goto corrupt;
            e->count[col] = (uint32_t)count;
            e->first[col] = (uint32_t)d->n_pos;
            if (with_positions && !cq_grow((void **)&d->pos, &d->cap_pos, d->n_pos + count, sizeof *d->pos))
                return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            for (uint64_t k = 0; k < count; k++) {
                uint64_t step;
                if (!get_varint(&p, end, &step)) goto corrupt;
                at += step;
                if (with_positions) d->pos[d->n_pos++] = (uint32_t)at;
            }
        }
    }
    return CQ_OK;
corrupt:
    return cq_err_set(err, CQ_ERR_FORMAT, "keyword index: a postings list is corrupt");
}

/* A phrase's occurrence in one clause. */
typedef struct {
    int64_t clause_id, doc_id;
    uint32_t positions;
    double freq;
} match;

typedef struct {
    match *m;
    size_t n, cap;
} matches;

static int cmp_stored(const void *a, const void *b) {
    const stored_row *x = a, *y = b;
    if (x->token != y->token) return x->token < y->token ? -1 : 1;
    return (x->doc_id > y->doc_id) - (x->doc_id < y->doc_id);
}

/* The row of (token, doc) in the sorted rows, or NULL (a token has one row a document). */
static const stored_row *find_row(const cq_keyword_search *s, uint32_t token, int64_t doc_id) {
    const stored_row key = {token, doc_id, 0, 0};
    return s->n_rows ? bsearch(&key, s->rows, s->n_rows, sizeof *s->rows, cmp_stored) : NULL;
}

static int cmp_u32(const void *a, const void *b) {
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static bool has_position(const uint32_t *pos, uint32_t n, uint32_t want) {
    return n && bsearch(&want, pos, n, sizeof *pos, cmp_u32);
}

/* Where phrase p occurs: one match per clause holding it (in some column), with its weighted count. */
static cq_status phrase_matches(const cq_keyword_search *s, const phrase *p, matches *out, cq_err *err) {
    cq_status rc = CQ_OK;
    size_t m = p->n;
    decoded *d = calloc(m, sizeof *d);
    const stored_row **rows = calloc(m, sizeof *rows);
    size_t *at = calloc(m, sizeof *at);
    const entry **ej = calloc(m, sizeof *ej); /* the clause in token j's list */
    if (!d || !rows || !at || !ej) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t r = 0; !rc && r < s->n_rows; r++) {
        if (s->rows[r].token != p->tokens[0]) continue;
        const int64_t doc_id = s->rows[r].doc_id;
        bool all = true;
        for (size_t j = 0; j < m && all; j++) all = (rows[j] = j ? find_row(s, p->tokens[j], doc_id) : &s->rows[r]);
        if (!all) continue;
        for (size_t j = 0; !rc && j < m; j++)
            rc = decode((const unsigned char *)s->arena.data + rows[j]->offset, rows[j]->bytes, m > 1, &d[j], err);
        memset(at, 0, m * sizeof *at);
        for (size_t i = 0; !rc && i < d[0].n; i++) {
            const entry *e0 = &d[0].e[i];
            double freq = 0;
            if (m == 1) {
                for (int col = 0; col < CQ_BM25_N_COLUMNS; col++) freq += cq_bm25_column_weight[col] * e0->count[col];
            } else {
                /* the same clause in the other tokens' lists (all in increasing id order) */
                bool in_all = true;
                for (size_t j = 1; j < m && in_all; j++) {
                    while (at[j] < d[j].n && d[j].e[at[j]].id < e0->id) at[j]++;
                    in_all = at[j] < d[j].n && d[j].e[at[j]].id == e0->id;
                    if (in_all) ej[j] = &d[j].e[at[j]];
                }
                if (!in_all) continue;
                for (int col = 0; col < CQ_BM25_N_COLUMNS; col++) {
                    const uint32_t *p0 = d[0].pos + e0->first[col];
                    for (uint32_t k = 0; k < e0->count[col]; k++) {
                        bool phrase_here = true;
                        for (size_t j = 1; j < m && phrase_here; j++)
                            phrase_here = has_position(d[j].pos + ej[j]->first[col], ej[j]->count[col],
                                                       p0[k] + (uint32_t)j);
                        if (phrase_here) freq += cq_bm25_column_weight[col];
                    }
                }
            }
            if (freq > 0 && !cq_grow((void **)&out->m, &out->cap, out->n + 1, sizeof *out->m))
                rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            else if (freq > 0)
                out->m[out->n++] = (match){e0->id, doc_id, e0->positions, freq};
        }
    }
    for (size_t j = 0; d && j < m; j++) {
        free(d[j].e);
        free(d[j].pos);
    }
    free(d);
    free(rows);
    free(at);
    free(ej);
    return rc;
}

/* Clause id -> running score (open addressing). */
typedef struct {
    cq_keyword_hit *slots; /* clause_id 0: empty (ids start at 1) */
    size_t n_slots, n;
} score_table;

static cq_keyword_hit *score_slot(score_table *t, int64_t clause_id, int64_t doc_id) {
    size_t mask = t->n_slots - 1, k = ((uint64_t)clause_id * 0x9E3779B97F4A7C15ull >> 20) & mask;
    while (t->slots[k].clause_id && t->slots[k].clause_id != clause_id) k = (k + 1) & mask;
    if (!t->slots[k].clause_id) {
        t->slots[k] = (cq_keyword_hit){clause_id, doc_id, 0.0};
        t->n++;
    }
    return &t->slots[k];
}

/* Better first: higher score, then lower clause id. */
static bool better(const cq_keyword_hit *a, const cq_keyword_hit *b) {
    return a->score != b->score ? a->score > b->score : a->clause_id < b->clause_id;
}

static int cmp_hit(const void *a, const void *b) {
    const cq_keyword_hit *x = a, *y = b;
    return better(x, y) ? -1 : better(y, x) ? 1 : 0;
}

/* Keeps the `limit` best of what it is offered: a heap whose root is the worst kept. */
static void heap_offer(cq_keyword_hit *h, size_t *n, size_t limit, const cq_keyword_hit *x) {
    size_t i;
    if (*n < limit) {
        i = (*n)++;
        while (i && better(&h[(i - 1) / 2], x)) {
            h[i] = h[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        h[i] = *x;
        return;
    }
    if (!better(x, &h[0])) return;
    i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && better(&h[c], &h[c + 1])) c++;
        if (!better(x, &h[c])) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = *x;
}

cq_status cq_keyword_search_rank(cq_keyword_search *s, int64_t n_rows, int64_t n_positions, const int64_t *doc_ids,
                                 size_t n_docs, size_t limit, cq_keyword_hit **out, size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    if (n_rows <= 0 || limit == 0 || s->n_phrases == 0) return CQ_OK;
    if (s->n_rows) qsort(s->rows, s->n_rows, sizeof *s->rows, cmp_stored);
    matches *ms = calloc(s->n_phrases, sizeof *ms);
    if (!ms) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_status rc = CQ_OK;
    size_t total = 0;
    for (size_t i = 0; !rc && i < s->n_phrases; i++) {
        rc = phrase_matches(s, &s->phrases[i], &ms[i], err);
        total += ms[i].n;
    }
    score_table t = {0};
    cq_keyword_hit *best = NULL;
    if (!rc) {
        t.n_slots = 64;
        while (t.n_slots < 2 * total) t.n_slots *= 2;
        t.slots = calloc(t.n_slots, sizeof *t.slots);
        best = malloc(limit * sizeof *best);
        if (!t.slots || !best) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    if (!rc) {
        const double avgdl = (double)n_positions / (double)n_rows;
        /* phrase by phrase, as FTS5 sums them (a phrase absent from a row adds exactly +0.0 there) */
        for (size_t i = 0; i < s->n_phrases; i++) {
            const double idf = cq_bm25_idf(n_rows, (int64_t)ms[i].n);
            for (size_t k = 0; k < ms[i].n; k++) {
                const match *x = &ms[i].m[k];
                bool wanted = n_docs == 0;
                for (size_t j = 0; j < n_docs && !wanted; j++) wanted = doc_ids[j] == x->doc_id;
                if (!wanted) continue;
                score_slot(&t, x->clause_id, x->doc_id)->score += cq_bm25_term(idf, x->freq, x->positions, avgdl);
            }
        }
        for (size_t k = 0; k < t.n_slots; k++)
            if (t.slots[k].clause_id) heap_offer(best, n, limit, &t.slots[k]);
        qsort(best, *n, sizeof *best, cmp_hit);
        *out = best;
        best = NULL;
    }
    for (size_t i = 0; i < s->n_phrases; i++) free(ms[i].m);
    free(ms);
    free(t.slots);
    free(best);
    return rc;
}
