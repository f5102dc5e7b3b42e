#include "decoder/tokenizer.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/grow.h"
#include "core/strbuf.h"
#include "core/utf8.h"

#define SPACE_MARK "\xe2\x96\x81" /* U+2581, SentencePiece's visible space */
#define SPACE_MARK_LEN 3

/* A trie over the raw-text spelling of special tokens, for longest-match splitting. Children are a sibling list:
 * the root has a handful of first bytes and deeper nodes fewer. */
typedef struct {
    int32_t first_child, next_sibling, token; /* token -1: not the end of a special token */
    uint8_t byte;
    bool control; /* the token ending here is a control token (matched only with CQ_TOK_PARSE_SPECIAL) */
} trie_node;

struct cq_tokenizer {
    int32_t n_vocab;
    char *arena;          /* all token texts, NUL-separated */
    uint32_t *text_off;   /* (n_vocab) offset of token i in arena */
    uint32_t *text_len;   /* (n_vocab) */
    float *scores;        /* (n_vocab) */
    uint8_t *types;       /* (n_vocab) cq_token_type */
    int32_t *hash;        /* open addressing over token texts; -1 empty */
    uint32_t hash_mask;
    int32_t byte_token[256]; /* id of <0xNN>, or -1 */
    int32_t bos, eos, unk, eot;
    bool add_space_prefix;
    bool add_bos;          /* CQ_TOK_ADD_BOS adds BOS (tokenizer.ggml.add_bos_token; default: llama yes, gpt2 no) */
    /* GPT-2 byte-level BPE (tokenizer.ggml.model = "gpt2"): tokens are spelled in byte_cp's code points, merges
     * ranked by their order in tokenizer.ggml.merges (pair of ids -> rank, open addressing). */
    bool gpt2;
    uint32_t byte_cp[256];  /* byte -> code point of its spelling */
    int16_t cp_byte[324];   /* code point (< 324) -> byte, or -1 */
    uint64_t *merge_key;    /* (left id + 1) << 32 | right id; 0 empty */
    int32_t *merge_rank;
    uint32_t merge_mask;
    trie_node *trie;
    int32_t n_trie, cap_trie;
};

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static const char *tok_text(const cq_tokenizer *t, int32_t id) { return t->arena + t->text_off[id]; }

/* Token id whose text is exactly s[0..n), or -1. */
static int32_t lookup(const cq_tokenizer *t, const char *s, size_t n) {
    for (uint32_t h = hash_bytes(s, n) & t->hash_mask;; h = (h + 1) & t->hash_mask) {
        int32_t id = t->hash[h];
        if (id < 0) return -1;
        if (t->text_len[id] == n && !memcmp(tok_text(t, id), s, n)) return id;
    }
}

static int32_t trie_add_node(cq_tokenizer *t, uint8_t byte) {
    if (t->n_trie == t->cap_trie) {
        int32_t cap = t->cap_trie ? t->cap_trie * 2 : 1024;
        trie_node *p = realloc(t->trie, (size_t)cap * sizeof *p);
        if (!p) return -1;
        t->trie = p;
        t->cap_trie = cap;
    }
    t->trie[t->n_trie] = (trie_node){-1, -1, -1, byte, false};
    return t->n_trie++;
}

static int32_t trie_child(const cq_tokenizer *t, int32_t node, uint8_t byte) {
    for (int32_t c = t->trie[node].first_child; c >= 0; c = t->trie[c].next_sibling)
        if (t->trie[c].byte == byte) return c;
    return -1;
}

/* Inserts the raw-text spelling (U+2581 read as a space) of special token id. */
static cq_status trie_insert(cq_tokenizer *t, int32_t id, cq_err *err) {
    const char *s = tok_text(t, id);
    size_t n = t->text_len[id];
    int32_t node = 0;
    for (size_t i = 0; i < n;) {
        uint8_t b;
        if (n - i >= SPACE_MARK_LEN && !memcmp(s + i, SPACE_MARK, SPACE_MARK_LEN)) {
            b = ' ';
            i += SPACE_MARK_LEN;
        } else {
            b = (uint8_t)s[i++];
        }
        int32_t c = trie_child(t, node, b);
        if (c < 0) {
            if ((c = trie_add_node(t, b)) < 0) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            t->trie[c].next_sibling = t->trie[node].first_child;
            t->trie[node].first_child = c;
        }
        node = c;
    }
    if (t->trie[node].token < 0) { /* first spelling wins (lower id) */
        t->trie[node].token = id;
        t->trie[node].control = t->types[id] == CQ_TOKEN_CONTROL;
    }
    return CQ_OK;
}

static int32_t get_id(const cq_gguf *g, const char *key, int32_t fallback, int32_t n_vocab) {
    uint32_t v;
    if (cq_gguf_get_u32(g, key, &v, NULL) == CQ_OK && v < (uint32_t)n_vocab) return (int32_t)v;
    return fallback;
}

/* GPT-2's bytes_to_unicode: the printable bytes ! .. ~, 0xA1 .. 0xAC, 0xAE .. 0xFF stand for themselves, the others
 * (controls, space, 0x7F .. 0xA0, 0xAD) for U+0100 + their rank among them. */
static void gpt2_byte_map(cq_tokenizer *t) {
    uint32_t next = 256;
    for (int i = 0; i < 324; i++) t->cp_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        t->byte_cp[b] = printable ? (uint32_t)b : next++;
        t->cp_byte[t->byte_cp[b]] = (int16_t)b;
    }
}

static uint64_t merge_hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return key;
}

static int32_t merge_rank(const cq_tokenizer *t, int32_t left, int32_t right) {
    const uint64_t key = ((uint64_t)(uint32_t)left + 1) << 32 | (uint32_t)right;
    for (uint64_t h = merge_hash(key) & t->merge_mask;; h = (h + 1) & t->merge_mask) {
        if (t->merge_key[h] == key) return t->merge_rank[h];
        if (!t->merge_key[h]) return -1;
    }
}

/* The byte map and the merge ranks: merge i is "A B" (A and B tokens, A B one too), rank i. */
static cq_status gpt2_init(cq_tokenizer *t, const cq_gguf *g, cq_err *err) {
    gpt2_byte_map(t);
    const cq_gguf_kv *merges = cq_gguf_find_kv(g, "tokenizer.ggml.merges");
    if (!merges || merges->type != CQ_GGUF_ARRAY || merges->arr_type != CQ_GGUF_STRING || merges->arr_count == 0 ||
        merges->arr_count > INT32_MAX / 4)
        return cq_err_set(err, CQ_ERR_FORMAT, "tokenizer: tokenizer.ggml.merges missing or not a string array");
    uint32_t size = 1;
    while (size < (uint32_t)merges->arr_count * 2) size <<= 1;
    t->merge_key = calloc(size, sizeof *t->merge_key);
    t->merge_rank = malloc((size_t)size * sizeof *t->merge_rank);
    if (!t->merge_key || !t->merge_rank) return cq_err_set(err, CQ_ERR_NOMEM, "tokenizer: out of memory for the merges");
    t->merge_mask = size - 1;
    for (uint64_t i = 0; i < merges->arr_count; i++) {
        const char *m = merges->strs[i].ptr;
        const size_t len = (size_t)merges->strs[i].len;
        const char *sp = len > 2 ? memchr(m + 1, ' ', len - 2) : NULL; /* the first space after A's first byte */
        int32_t a = sp ? lookup(t, m, (size_t)(sp - m)) : -1, b = sp ? lookup(t, sp + 1, len - (size_t)(sp - m) - 1) : -1;
        if (a < 0 || b < 0) continue; /* a merge of strings that are not tokens can never apply */
        const uint64_t key = ((uint64_t)(uint32_t)a + 1) << 32 | (uint32_t)b;
        uint64_t h = merge_hash(key) & t->merge_mask;
        while (t->merge_key[h] && t->merge_key[h] != key) h = (h + 1) & t->merge_mask;
        if (!t->merge_key[h]) t->merge_key[h] = key, t->merge_rank[h] = (int32_t)i; /* the first rank wins */
    }
    return CQ_OK;
}

cq_status cq_tokenizer_from_gguf(const cq_gguf *g, cq_tokenizer **out, cq_err *err) {
    *out = NULL;
    char model[32];
    cq_status s = cq_gguf_get_str(g, "tokenizer.ggml.model", model, sizeof model, err);
    if (s) return cq_err_prefix(err, "tokenizer: ");
    const bool gpt2 = !strcmp(model, "gpt2");
    if (strcmp(model, "llama") && !gpt2)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED,
                          "tokenizer: model '%s' not supported (SentencePiece 'llama' and byte-level BPE 'gpt2' are)",
                          model);
    if (gpt2) {
        char pre[32] = "";
        if (cq_gguf_get_str(g, "tokenizer.ggml.pre", pre, sizeof pre, NULL) == CQ_OK && strcmp(pre, "qwen2"))
            return cq_err_set(err, CQ_ERR_UNSUPPORTED,
                              "tokenizer: pre-tokenizer '%s' not supported (the gpt2 model is read with 'qwen2')", pre);
    }
    const cq_gguf_kv *tokens = cq_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (!tokens || tokens->type != CQ_GGUF_ARRAY || tokens->arr_type != CQ_GGUF_STRING || tokens->arr_count == 0 ||
        tokens->arr_count > INT32_MAX / 4)
        return cq_err_set(err, CQ_ERR_FORMAT, "tokenizer: tokenizer.ggml.tokens missing or not a string array");
    int32_t n = (int32_t)tokens->arr_count;
    cq_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    t->n_vocab = n;
    t->gpt2 = gpt2;
    size_t arena_size = 0;
    for (int32_t i = 0; i < n; i++) arena_size += (size_t)tokens->strs[i].len + 1;
    t->arena = malloc(arena_size);
    t->text_off = malloc((size_t)n * sizeof *t->text_off);
    t->text_len = malloc((size_t)n * sizeof *t->text_len);
    t->scores = calloc((size_t)n, sizeof *t->scores);
    t->types = malloc((size_t)n);
    uint32_t hash_size = 1;
    while (hash_size < (uint32_t)n * 2) hash_size <<= 1;
    t->hash = malloc((size_t)hash_size * sizeof *t->hash);
    t->hash_mask = hash_size - 1;
    if (!t->arena || !t->text_off || !t->text_len || !t->scores || !t->types || !t->hash || arena_size > UINT32_MAX) {
        cq_tokenizer_free(t);
        return cq_err_set(err, CQ_ERR_NOMEM, "tokenizer: out of memory for %d tokens", n);
    }
    size_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        t->text_off[i] = (uint32_t)off;
        t->text_len[i] = (uint32_t)tokens->strs[i].len;
        memcpy(t->arena + off, tokens->strs[i].ptr, (size_t)tokens->strs[i].len);
        off += (size_t)tokens->strs[i].len;
        t->arena[off++] = 0;
    }
    /* Scores and types are optional in GGUF; without types every token is normal. */
    int32_t *types = malloc((size_t)n * sizeof *types);
    if (!types) {
        cq_tokenizer_free(t);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    s = cq_gguf_get_arr_i32(g, "tokenizer.ggml.token_type", types, (size_t)n, err);
    if (s == CQ_ERR_NOT_FOUND) {
        for (int32_t i = 0; i < n; i++) types[i] = CQ_TOKEN_NORMAL;
        s = CQ_OK;
    }
    if (!s) s = cq_gguf_get_arr_f32(g, "tokenizer.ggml.scores", t->scores, (size_t)n, err);
    if (s == CQ_ERR_NOT_FOUND) s = CQ_OK; /* scores stay 0: merges then go leftmost-first */
    if (s) {
        free(types);
        cq_tokenizer_free(t);
        return cq_err_prefix(err, "tokenizer: ");
    }
    for (int32_t i = 0; i < n; i++)
        t->types[i] = (types[i] >= CQ_TOKEN_NORMAL && types[i] <= CQ_TOKEN_BYTE) ? (uint8_t)types[i] : CQ_TOKEN_NORMAL;
    free(types);

    memset(t->hash, 0xff, (size_t)hash_size * sizeof *t->hash);
    for (int32_t i = 0; i < 256; i++) t->byte_token[i] = -1;
    for (int32_t i = 0; i < n; i++) {
        const char *txt = tok_text(t, i);
        uint32_t h = hash_bytes(txt, t->text_len[i]) & t->hash_mask;
        bool dup = false;
        for (; t->hash[h] >= 0; h = (h + 1) & t->hash_mask)
            if (t->text_len[t->hash[h]] == t->text_len[i] && !memcmp(tok_text(t, t->hash[h]), txt, t->text_len[i]))
                dup = true; /* keep the lower id */
        if (!dup) t->hash[h] = i;
        if (t->types[i] == CQ_TOKEN_BYTE && t->text_len[i] == 6 && !strncmp(txt, "<0x", 3) && txt[5] == '>') {
            unsigned v;
            char hex[3] = {txt[3], txt[4], 0}, *end;
            v = (unsigned)strtoul(hex, &end, 16);
            if (*end == 0 && t->byte_token[v] < 0) t->byte_token[v] = i;
        }
    }
    t->bos = get_id(g, "tokenizer.ggml.bos_token_id", lookup(t, "<bos>", 5), n);
    t->eos = get_id(g, "tokenizer.ggml.eos_token_id", lookup(t, "<eos>", 5), n);
    t->unk = get_id(g, "tokenizer.ggml.unknown_token_id", lookup(t, "<unk>", 5), n);
    bool prefix = false;
    if (!gpt2 && cq_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &prefix, NULL) == CQ_OK)
        t->add_space_prefix = prefix;
    t->add_bos = !gpt2;
    bool add_bos;
    if (cq_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos, NULL) == CQ_OK) t->add_bos = add_bos;
    int32_t eot = lookup(t, "<end_of_turn>", 13);
    if (eot < 0) eot = lookup(t, "<|im_end|>", 10);
    t->eot = get_id(g, "tokenizer.ggml.eot_token_id", eot, n);
    if (gpt2 && (s = gpt2_init(t, g, err))) {
        cq_tokenizer_free(t);
        return s;
    }

    if (trie_add_node(t, 0) < 0) {
        cq_tokenizer_free(t);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    for (int32_t i = 0; i < n; i++) {
        if ((t->types[i] == CQ_TOKEN_CONTROL || t->types[i] == CQ_TOKEN_USER_DEFINED) && t->text_len[i] > 0) {
            if ((s = trie_insert(t, i, err))) {
                cq_tokenizer_free(t);
                return s;
            }
        }
    }
    *out = t;
    return CQ_OK;
}

void cq_tokenizer_free(cq_tokenizer *t) {
    if (!t) return;
    free(t->arena);
    free(t->text_off);
    free(t->text_len);
    free(t->scores);
    free(t->types);
    free(t->hash);
    free(t->trie);
    free(t->merge_key);
    free(t->merge_rank);
    free(t);
}

int32_t cq_tokenizer_vocab_size(const cq_tokenizer *t) { return t->n_vocab; }
int32_t cq_tokenizer_bos(const cq_tokenizer *t) { return t->bos; }
int32_t cq_tokenizer_eos(const cq_tokenizer *t) { return t->eos; }
int32_t cq_tokenizer_eot(const cq_tokenizer *t) { return t->eot; }
bool cq_tokenizer_adds_bos(const cq_tokenizer *t) { return t->add_bos && t->bos >= 0; }
bool cq_tokenizer_is_gpt2(const cq_tokenizer *t) { return t->gpt2; }
int32_t cq_tokenizer_find(const cq_tokenizer *t, const char *piece) { return lookup(t, piece, strlen(piece)); }
cq_token_type cq_tokenizer_type(const cq_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? (cq_token_type)t->types[id] : CQ_TOKEN_UNKNOWN;
}

/* ---- encoding ----------------------------------------------------------------------------------------------- */

typedef struct {
    int32_t *ids;
    size_t n, cap;
    bool failed;
} id_vec;

static void push_id(id_vec *v, int32_t id) {
    if (v->failed) return;
    if (!cq_grow((void **)&v->ids, &v->cap, v->n + 1, sizeof *v->ids)) {
        v->failed = true;
        return;
    }
    v->ids[v->n++] = id;
}

typedef struct {
    uint32_t start, len; /* bytes in the normalized text */
    int32_t prev, next;  /* linked list of live symbols; -1 at the ends */
} symbol;

typedef struct {
    float score;
    int32_t left, right;
    uint32_t len; /* merged length when queued: stale entries no longer match */
} candidate;

/* Max-heap on score, then leftmost. */
static bool cand_before(const candidate *a, const candidate *b) {
    if (a->score != b->score) return a->score > b->score;
    return a->left < b->left;
}

typedef struct {
    candidate *items;
    size_t n, cap;
    bool failed;
} heap;

static void heap_push(heap *h, candidate c) {
    if (h->failed) return;
    if (!cq_grow((void **)&h->items, &h->cap, h->n + 1, sizeof *h->items)) {
        h->failed = true;
        return;
    }
    size_t i = h->n++;
    while (i > 0 && cand_before(&c, &h->items[(i - 1) / 2])) {
        h->items[i] = h->items[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->items[i] = c;
}

static candidate heap_pop(heap *h) {
    candidate top = h->items[0], last = h->items[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, best = i;
        const candidate *bp = &last;
        if (l < h->n && cand_before(&h->items[l], bp)) best = l, bp = &h->items[l];
        if (r < h->n && cand_before(&h->items[r], bp)) best = r;
        if (best == i) break;
        h->items[i] = h->items[best];
        i = best;
    }
    if (h->n) h->items[i] = last;
    return top;
}

/* Queues the merge of symbols l and r if their concatenation is a mergeable token. */
static void try_pair(const cq_tokenizer *t, const char *text, const symbol *sym, int32_t l, int32_t r, heap *h) {
    if (l < 0 || r < 0) return;
    uint32_t len = sym[l].len + sym[r].len;
    if (t->gpt2) { /* the pair's rank in the merges, lowest first */
        int32_t a = lookup(t, text + sym[l].start, sym[l].len), b = lookup(t, text + sym[r].start, sym[r].len);
        int32_t rank = a >= 0 && b >= 0 ? merge_rank(t, a, b) : -1;
        if (rank >= 0 && lookup(t, text + sym[l].start, len) >= 0) heap_push(h, (candidate){-(float)rank, l, r, len});
        return;
    }
    int32_t id = lookup(t, text + sym[l].start, len);
    if (id < 0 || (t->types[id] != CQ_TOKEN_NORMAL && t->types[id] != CQ_TOKEN_USER_DEFINED)) return;
    heap_push(h, (candidate){t->scores[id], l, r, len});
}

/* Length of the UTF-8 character at s (n bytes left): 1 for an invalid byte, which then stays a byte of its own. */
static uint32_t utf8_char_len(const unsigned char *s, size_t n) {
    uint32_t len = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 1;
    if (len > n) return 1;
    for (uint32_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 1;
    return len;
}

static cq_status bpe(const cq_tokenizer *t, const cq_strbuf *norm, id_vec *out, cq_err *err);

/* BPE over one piece of text with no special tokens. */
static cq_status encode_fragment(const cq_tokenizer *t, const char *raw, size_t n, bool space_prefix, id_vec *out,
                                 cq_err *err) {
    cq_strbuf norm = {0};
    if (space_prefix) cq_strbuf_append(&norm, SPACE_MARK, SPACE_MARK_LEN);
    for (size_t i = 0; i < n; i++) {
        if (raw[i] == ' ') cq_strbuf_append(&norm, SPACE_MARK, SPACE_MARK_LEN);
        else cq_strbuf_append(&norm, raw + i, 1);
    }
    cq_status s = bpe(t, &norm, out, err);
    cq_strbuf_free(&norm);
    return s;
}

/* ---- the qwen2 pre-tokenizer -----------------------------------------------------------------------------------
 * Pieces as the regex
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N} | ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ |
 *   \s+(?!\S) | \s+
 * cuts them (the first alternative that matches at a position wins, each greedy, then the next position), written
 * out over code points: letters and numbers are Unicode's general categories L* and N* (utf8proc), \s its
 * White_Space property. A byte that is not valid UTF-8 is a character of its own of no class. */
enum { CC_OTHER, CC_LETTER, CC_NUMBER, CC_SPACE, CC_NEWLINE };

static bool white_space(uint32_t c) {
    return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static uint8_t char_class(uint32_t c, bool valid) {
    if (!valid) return CC_OTHER;
    if (c == '\r' || c == '\n') return CC_NEWLINE;
    if (white_space(c)) return CC_SPACE;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: return CC_LETTER;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO: return CC_NUMBER;
    default: return CC_OTHER;
    }
}

static bool is_ws(uint8_t c) { return c == CC_SPACE || c == CC_NEWLINE; }

static uint32_t lower_ascii(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* The end (in characters) of the piece that starts at character i of n, with classes cls and code points cp. */
static size_t qwen2_piece(const uint32_t *cp, const uint8_t *cls, size_t i, size_t n) {
    if (cp[i] == '\'' && i + 1 < n) { /* contractions */
        uint32_t a = lower_ascii(cp[i + 1]), b = i + 2 < n ? lower_ascii(cp[i + 2]) : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
    size_t j = i;
    if (cls[j] != CC_LETTER && cls[j] != CC_NUMBER && cls[j] != CC_NEWLINE && j + 1 < n && cls[j + 1] == CC_LETTER) j++;
    if (cls[j] == CC_LETTER) { /* an optional non-letter, non-number, non-newline, then letters */
        while (j < n && cls[j] == CC_LETTER) j++;
        return j;
    }
    if (cls[i] == CC_NUMBER) return i + 1;
    j = i + (cp[i] == ' ' && i + 1 < n && cls[i + 1] == CC_OTHER);
    if (cls[j] == CC_OTHER) { /* an optional space, punctuation and symbols, then newlines */
        while (j < n && cls[j] == CC_OTHER) j++;
        while (j < n && cls[j] == CC_NEWLINE) j++;
        return j;
    }
    /* white space from i to e */
    size_t e = i, last_nl = n;
    while (e < n && is_ws(cls[e])) {
        if (cls[e] == CC_NEWLINE) last_nl = e;
        e++;
    }
    if (last_nl < n) return last_nl + 1;   /* \s*[\r\n]+: up to the run's last newline */
    if (e == n || e - i == 1) return e;   /* \s+(?!\S) at the end; else \s+ for a lone space */
    return e - 1;                         /* \s+(?!\S): all but the last, which goes with what follows */
}

/* Pre-tokenizes raw[0..n), maps each piece's bytes to their GPT-2 code points, and runs BPE on it. */
static cq_status encode_fragment_gpt2(const cq_tokenizer *t, const char *raw, size_t n, id_vec *out, cq_err *err) {
    if (n == 0) return CQ_OK;
    uint32_t *cp = malloc(n * sizeof *cp), *off = malloc((n + 1) * sizeof *off);
    uint8_t *cls = malloc(n);
    if (!cp || !off || !cls || n > UINT32_MAX / 8) {
        free(cp), free(off), free(cls);
        return cq_err_set(err, CQ_ERR_NOMEM, "tokenizer: out of memory");
    }
    size_t nc = 0;
    for (size_t i = 0; i < n;) {
        size_t len;
        uint32_t c = cq_utf8_decode(raw + i, n - i, &len);
        const bool valid = !(c == CQ_UTF8_REPLACEMENT && (len != 3 || memcmp(raw + i, "\xef\xbf\xbd", 3)));
        cp[nc] = c, cls[nc] = char_class(c, valid), off[nc] = (uint32_t)i;
        nc++;
        i += len;
    }
    off[nc] = (uint32_t)n;
    cq_status s = CQ_OK;
    cq_strbuf piece = {0};
    for (size_t i = 0; i < nc && !s;) {
        const size_t e = qwen2_piece(cp, cls, i, nc);
        piece.len = 0;
        for (uint32_t k = off[i]; k < off[e]; k++) {
            char u[4];
            cq_strbuf_append(&piece, u, cq_utf8_encode(t->byte_cp[(uint8_t)raw[k]], u));
        }
        s = bpe(t, &piece, out, err);
        i = e;
    }
    cq_strbuf_free(&piece);
    free(cp), free(off), free(cls);
    return s;
}

/* BPE over a normalized piece (llama: spaces as U+2581; gpt2: bytes as their code points) into ids. */
static cq_status bpe(const cq_tokenizer *t, const cq_strbuf *normp, id_vec *out, cq_err *err) {
    const cq_strbuf norm = *normp;
    if (norm.failed || norm.len > UINT32_MAX / 2) return cq_err_set(err, CQ_ERR_NOMEM, "tokenizer: out of memory");
    if (norm.len == 0) return CQ_OK;
    const char *text = norm.data;
    symbol *sym = malloc(norm.len * sizeof *sym);
    heap h = {0};
    if (!sym) return cq_err_set(err, CQ_ERR_NOMEM, "tokenizer: out of memory");
    int32_t n_sym = 0;
    for (size_t i = 0; i < norm.len;) {
        uint32_t len = utf8_char_len((const unsigned char *)text + i, norm.len - i);
        sym[n_sym] = (symbol){(uint32_t)i, len, n_sym - 1, n_sym + 1};
        n_sym++;
        i += len;
    }
    sym[n_sym - 1].next = -1;
    for (int32_t i = 0; i + 1 < n_sym; i++) try_pair(t, text, sym, i, i + 1, &h);
    while (h.n && !h.failed) {
        candidate c = heap_pop(&h);
        /* Stale if either side was merged away or grew since it was queued. */
        if (sym[c.left].len == 0 || sym[c.right].len == 0 || sym[c.left].next != c.right ||
            sym[c.left].len + sym[c.right].len != c.len)
            continue;
        sym[c.left].len = c.len;
        sym[c.right].len = 0;
        sym[c.left].next = sym[c.right].next;
        if (sym[c.right].next >= 0) sym[sym[c.right].next].prev = c.left;
        try_pair(t, text, sym, sym[c.left].prev, c.left, &h);
        try_pair(t, text, sym, c.left, sym[c.left].next, &h);
    }
    cq_status s = h.failed ? cq_err_set(err, CQ_ERR_NOMEM, "tokenizer: out of memory") : CQ_OK;
    for (int32_t i = 0; !s && i >= 0; i = sym[i].next) {
        int32_t id = lookup(t, text + sym[i].start, sym[i].len);
        if (id >= 0 && t->types[id] != CQ_TOKEN_CONTROL && t->types[id] != CQ_TOKEN_UNUSED) {
            push_id(out, id);
            continue;
        }
        if (t->gpt2) { /* a vocabulary without one of the 256 byte spellings: said, not guessed */
            s = cq_err_set(err, CQ_ERR_FORMAT, "tokenizer: the vocabulary has no token '%.*s'", (int)sym[i].len,
                           text + sym[i].start);
            break;
        }
        for (uint32_t k = 0; k < sym[i].len; k++) { /* byte fallback */
            int32_t b = t->byte_token[(uint8_t)text[sym[i].start + k]];
            push_id(out, b >= 0 ? b : t->unk);
        }
    }
    free(h.items);
    free(sym);
    return s;
}

/* Longest special token at s (n bytes), or -1 with *len untouched. */
static int32_t match_special(const cq_tokenizer *t, const char *s, size_t n, bool parse_control, size_t *len) {
    int32_t node = 0, best = -1;
    for (size_t i = 0; i < n; i++) {
        node = trie_child(t, node, (uint8_t)s[i]);
        if (node < 0) break;
        if (t->trie[node].token >= 0 && (parse_control || !t->trie[node].control)) {
            best = t->trie[node].token;
            *len = i + 1;
        }
    }
    return best;
}

cq_status cq_tokenizer_encode(const cq_tokenizer *t, const char *text, size_t len, unsigned flags, int32_t **ids,
                              size_t *n_ids, cq_err *err) {
    *ids = NULL;
    *n_ids = 0;
    id_vec v = {0};
    if ((flags & CQ_TOK_ADD_BOS) && t->add_bos && t->bos >= 0) push_id(&v, t->bos);
    bool parse_control = (flags & CQ_TOK_PARSE_SPECIAL) != 0;
    size_t frag = 0; /* start of the text not yet encoded */
    cq_status s = CQ_OK;
    for (size_t i = 0; i < len && !s;) {
        size_t mlen = 0;
        int32_t id = match_special(t, text + i, len - i, parse_control, &mlen);
        /* A literal U+2581 in the text would decode as a space: spell it in byte tokens so decoding is exact. */
        bool literal_mark = id < 0 && !t->gpt2 && len - i >= SPACE_MARK_LEN && !memcmp(text + i, SPACE_MARK, SPACE_MARK_LEN) &&
                            t->byte_token[0xe2] >= 0 && t->byte_token[0x96] >= 0 && t->byte_token[0x81] >= 0;
        if (id < 0 && !literal_mark) {
            i++;
            continue;
        }
        if (i > frag) s = t->gpt2 ? encode_fragment_gpt2(t, text + frag, i - frag, &v, err)
                                  : encode_fragment(t, text + frag, i - frag, t->add_space_prefix && frag == 0, &v, err);
        if (literal_mark) {
            for (int k = 0; k < SPACE_MARK_LEN; k++) push_id(&v, t->byte_token[(uint8_t)SPACE_MARK[k]]);
            mlen = SPACE_MARK_LEN;
        } else {
            push_id(&v, id);
        }
        i += mlen;
        frag = i;
    }
    if (!s && len > frag)
        s = t->gpt2 ? encode_fragment_gpt2(t, text + frag, len - frag, &v, err)
                    : encode_fragment(t, text + frag, len - frag, t->add_space_prefix && frag == 0, &v, err);
    if (!s && v.failed) s = cq_err_set(err, CQ_ERR_NOMEM, "tokenizer: out of memory");
    if (s) {
        free(v.ids);
        return s;
    }
    *ids = v.ids;
    *n_ids = v.n;
    return CQ_OK;
}

/* ---- decoding ----------------------------------------------------------------------------------------------- */

size_t cq_tokenizer_piece(const cq_tokenizer *t, int32_t id, bool render_special, char *buf, size_t cap) {
    if (id < 0 || id >= t->n_vocab) return 0;
    const char *s = tok_text(t, id);
    size_t n = t->text_len[id], out = 0;
    switch (t->types[id]) {
    case CQ_TOKEN_BYTE: {
        char hex[3] = {0}, *end;
        if (n == 6 && !strncmp(s, "<0x", 3) && s[5] == '>') {
            hex[0] = s[3], hex[1] = s[4];
            unsigned long b = strtoul(hex, &end, 16);
            if (*end == 0) {
                if (cap) buf[0] = (char)b;
                return 1;
            }
        }
        break; /* a byte token with an odd spelling: render as text */
    }
    case CQ_TOKEN_CONTROL:
    case CQ_TOKEN_UNKNOWN:
    case CQ_TOKEN_UNUSED:
        if (!render_special) return 0;
        break;
    case CQ_TOKEN_NORMAL:
        if (!t->gpt2) break;
        for (size_t i = 0; i < n;) { /* each code point back to its byte */
            size_t len;
            uint32_t c = cq_utf8_decode(s + i, n - i, &len);
            if (c < 324 && t->cp_byte[c] >= 0) {
                if (out < cap) buf[out] = (char)t->cp_byte[c];
                out++;
            } else { /* not a byte's spelling: the text as it is */
                for (size_t k = 0; k < len; k++, out++)
                    if (out < cap) buf[out] = s[i + k];
            }
            i += len;
        }
        return out;
    default: break;
    }
    if (t->gpt2) { /* control and user-defined tokens: their text */
        for (size_t i = 0; i < n; i++, out++)
            if (out < cap) buf[out] = s[i];
        return out;
    }
    for (size_t i = 0; i < n;) {
        if (n - i >= SPACE_MARK_LEN && !memcmp(s + i, SPACE_MARK, SPACE_MARK_LEN)) {
            if (out < cap) buf[out] = ' ';
            out++;
            i += SPACE_MARK_LEN;
        } else {
            if (out < cap) buf[out] = s[i];
            out++;
            i++;
        }
    }
    return out;
}

cq_status cq_tokenizer_decode(const cq_tokenizer *t, const int32_t *ids, size_t n, bool render_special, char **text,
                              size_t *len, cq_err *err) {
    *text = NULL;
    if (len) *len = 0;
    cq_strbuf b = {0};
    char small[256];
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) {
            cq_strbuf_free(&b);
            return cq_err_set(err, CQ_ERR_INVALID, "token id %d out of range (vocabulary %d)", ids[i], t->n_vocab);
        }
        size_t m = cq_tokenizer_piece(t, ids[i], render_special, small, sizeof small);
        if (m <= sizeof small) {
            const char *p = small;
            /* The dummy prefix added at encoding is not part of the text. */
            if (t->add_space_prefix && b.len == 0 && m > 0 && p[0] == ' ') p++, m--;
            cq_strbuf_append(&b, p, m);
        } else {
            char *big = malloc(m);
            if (!big) {
                cq_strbuf_free(&b);
                return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            }
            cq_tokenizer_piece(t, ids[i], render_special, big, m);
            cq_strbuf_append(&b, big, m);
            free(big);
        }
    }
    if (b.failed) {
        cq_strbuf_free(&b);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    if (len) *len = b.len;
    *text = cq_strbuf_take(&b);
    return CQ_OK;
}
