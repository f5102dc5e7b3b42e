/* The `cjk` FTS5 tokenizer. Token rules and the reasons for them are in fts_cjk.h.
 *
 * One pass over the source bytes: decode a code point, fold it (most text takes a fast path: ASCII and the
 * main Han block fold to themselves or by a table), classify each folded code point, and feed it to a small
 * state machine that holds at most one open CJK run (its previous character) or one open word (its folded
 * characters). Nothing is allocated. */
#include "store/fts_cjk.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/grow.h"
#include "core/text_norm.h"
#include "core/utf8.h"

/* Longest NFKC + case fold of one code point is 18 code points (U+FDFA). */
#define FOLD_MAX 18
#define WORD_MAX_BYTES (CQ_FTS_CJK_MAX_WORD_CHARS * 4)

typedef enum {
    CL_SEP,  /* separates tokens, ends CJK runs */
    CL_CJK,  /* Han ideograph or kana: bigrammed */
    CL_WORD, /* letter or digit */
    CL_MARK, /* combining mark: joins the word before it, else ignored */
    CL_DOT,  /* '.': joins digit.digit inside a word */
    CL_APOS, /* ' or ’: joins letter'letter inside a word */
} char_class;

typedef struct {
    cq_token_cb cb;
    void *ctx;
    bool query;
    int rc;           /* first non-zero callback return: stop */
    size_t last_end;  /* document mode: end of the last positioned token, keeps offsets non-overlapping */

    /* open CJK run: run_len characters seen, the last of them (prev) not emitted yet as a unigram */
    size_t run_len;
    uint32_t prev;
    size_t prev_start, prev_end;

    /* open word: folded characters (at most CQ_FTS_CJK_MAX_WORD_CHARS kept), offsets of the whole word */
    uint32_t word[CQ_FTS_CJK_MAX_WORD_CHARS];
    size_t word_len;      /* characters kept */
    bool word_open;
    bool word_marks;      /* holds combining marks: recompose before emitting */
    uint32_t word_last;   /* last character appended, kept or not */
    size_t word_start, word_end;
    uint32_t joiner;      /* pending '.' or '\'' after the word, 0 if none */

    /* query mode: the tail unigram of the last closed run, emitted only if another token follows */
    char tail[4];
    size_t tail_len, tail_start, tail_end;
} tok_state;

/* An ASCII character's class: letters and digits make words, '.' and '\'' may join them, the rest separates. */
static char_class ascii_class(unsigned char c) {
    if ((unsigned)((c | 32) - 'a') < 26 || (unsigned)(c - '0') < 10) return CL_WORD;
    return c == '.' ? CL_DOT : c == '\'' ? CL_APOS : CL_SEP;
}

static bool is_kana(uint32_t cp) {
    return (cp >= 0x3041 && cp <= 0x3096) || (cp >= 0x309D && cp <= 0x309F) || (cp >= 0x30A1 && cp <= 0x30FA) ||
           (cp >= 0x30FC && cp <= 0x30FF) || (cp >= 0x31F0 && cp <= 0x31FF);
}

/* Zero-width characters that PDF extraction leaves inside words: skipped, they separate nothing. */
static bool is_invisible(uint32_t cp) {
    return cp == 0x00AD || (cp >= 0x200B && cp <= 0x200D) || cp == 0x2060 || cp == 0xFEFF;
}

/* Class of a folded code point. */
static char_class classify(uint32_t cp) {
    if (cp < 0x80) return ascii_class((unsigned char)cp);
    if (cq_is_cjk(cp) || is_kana(cp)) return CL_CJK;
    if (cp == 0x2019) return CL_APOS;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
        return CL_WORD;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
        return CL_MARK;
    default:
        return CL_SEP;
    }
}

/* Folds one non-ASCII code point outside the fast paths: repair (radicals, full-width, controls), then NFKC +
 * case fold of that code point alone. Writes the result to out (FOLD_MAX room) and returns its length; a
 * character to be skipped yields 0, one that only separates yields ' '. */
static size_t fold_slow(uint32_t cp, uint32_t *out) {
    if (is_invisible(cp)) return 0;
    cq_text_stats stats = {0};
    uint32_t repaired = cq_text_repair_cp(cp, &stats);
    if (!repaired) {
        out[0] = ' ';
        return 1;
    }
    utf8proc_int32_t buf[FOLD_MAX];
    int boundclass = 0;
    utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)repaired, buf, FOLD_MAX,
                                                 UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT | UTF8PROC_CASEFOLD,
                                                 &boundclass);
    if (n <= 0 || n > FOLD_MAX) {
        out[0] = ' ';
        return 1;
    }
    if (n > 1) n = utf8proc_normalize_utf32(buf, n, UTF8PROC_COMPOSE | UTF8PROC_STABLE);
    for (utf8proc_ssize_t i = 0; i < n; i++) out[i] = (uint32_t)buf[i];
    return n > 0 ? (size_t)n : 0;
}

static void emit(tok_state *st, const char *tok, size_t len, size_t start, size_t end, unsigned flags) {
    if (st->rc) return;
    if (st->tail_len) {
        /* Something follows the run: its tail keeps the phrase's positions aligned with the document's. */
        size_t n = st->tail_len;
        st->tail_len = 0;
        st->rc = st->cb(st->ctx, st->tail, n, st->tail_start, st->tail_end, CQ_FTS_TOK_TAIL);
        if (st->rc) return;
    }
    if (!st->query && !(flags & CQ_FTS_TOK_COLOCATED)) {
        /* highlight() copies text between consecutive positions' offsets and misbehaves when they overlap;
         * overlap happens only when one source character folds to several (㍻ → 平成). */
        if (start < st->last_end) start = st->last_end;
        if (end < start) end = start;
        st->last_end = end;
    }
    st->rc = st->cb(st->ctx, tok, len, start, end, flags);
}

/* ---- CJK runs ---------------------------------------------------------------------------------------- */

static void run_add(tok_state *st, uint32_t cp, size_t start, size_t end) {
    if (st->run_len) {
        char buf[8];
        size_t n1 = cq_utf8_encode(st->prev, buf);
        size_t n2 = cq_utf8_encode(cp, buf + n1);
        if (st->query) {
            emit(st, buf, n1 + n2, st->prev_start, end, 0);
        } else {
            /* The bigram's offsets are its first character's, exactly as the unigram it shares a position with
             * gets them: offsets of neighbouring positions never overlap, so highlight() stays exact. */
            size_t s0 = st->prev_start < st->last_end ? st->last_end : st->prev_start;
            size_t e0 = st->prev_end < s0 ? s0 : st->prev_end;
            emit(st, buf, n1, s0, e0, 0);
            emit(st, buf, n1 + n2, s0, e0, CQ_FTS_TOK_COLOCATED);
        }
    }
    st->prev = cp;
    st->prev_start = start;
    st->prev_end = end;
    st->run_len++;
}

static void run_close(tok_state *st) {
    if (!st->run_len) return;
    char buf[4];
    size_t n = cq_utf8_encode(st->prev, buf);
    if (st->query && st->run_len > 1) {
        /* Held back: at the end of the query string the run is fully said by its bigrams, and a phrase of
         * single-token bigrams costs FTS5 far less than one that also needs the tail's positions. */
        memcpy(st->tail, buf, n);
        st->tail_len = n;
        st->tail_start = st->prev_start;
        st->tail_end = st->prev_end;
    } else {
        emit(st, buf, n, st->prev_start, st->prev_end, 0);
    }
    st->run_len = 0;
}

/* ---- words ------------------------------------------------------------------------------------------- */

static bool is_digit(uint32_t cp) { return cp >= '0' && cp <= '9'; }

static void word_append(tok_state *st, uint32_t cp, size_t end) {
    if (st->word_len < CQ_FTS_CJK_MAX_WORD_CHARS) st->word[st->word_len++] = cp;
    st->word_last = cp;
    st->word_end = end;
}

static void word_open(tok_state *st, uint32_t cp, size_t start, size_t end) {
    st->word_open = true;
    st->word_len = 0;
    st->word_marks = false;
    st->joiner = 0;
    st->word_start = start;
    word_append(st, cp, end);
}

/* Encodes w[0..n) into out (WORD_MAX_BYTES room) and returns the byte length. */
static size_t encode_cps(const uint32_t *w, size_t n, char *out) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += cq_utf8_encode(w[i], out + len);
    return len;
}

/* A word with combining marks is recomposed (NFKC of the whole word), so "e\u0301" and "é" agree. */
static size_t word_recompose(const uint32_t *w, size_t n, char *out) {
    char raw[WORD_MAX_BYTES];
    size_t raw_len = encode_cps(w, n, raw);
    utf8proc_int32_t buf[2 * CQ_FTS_CJK_MAX_WORD_CHARS + FOLD_MAX];
    const utf8proc_ssize_t cap = (utf8proc_ssize_t)(sizeof buf / sizeof buf[0]);
    utf8proc_ssize_t m = utf8proc_decompose((const utf8proc_uint8_t *)raw, (utf8proc_ssize_t)raw_len, buf, cap,
                                            UTF8PROC_COMPOSE | UTF8PROC_COMPAT | UTF8PROC_CASEFOLD |
                                                UTF8PROC_STABLE);
    if (m >= 0 && m <= cap) m = utf8proc_normalize_utf32(buf, m, UTF8PROC_COMPOSE | UTF8PROC_STABLE);
    if (m < 0 || m > cap) { /* as it is */
        memcpy(out, raw, raw_len);
        return raw_len;
    }
    size_t len = 0;
    for (utf8proc_ssize_t i = 0; i < m && i < CQ_FTS_CJK_MAX_WORD_CHARS; i++)
        len += cq_utf8_encode((uint32_t)buf[i], out + len);
    return len;
}

static void word_close(tok_state *st) {
    if (!st->word_open) return;
    st->word_open = false;
    st->joiner = 0;
    size_t n = st->word_len;
    if (n >= 3 && st->word[n - 2] == '\'' && st->word[n - 1] == 's') n -= 2; /* possessive 's */
    char buf[WORD_MAX_BYTES];
    size_t len = st->word_marks ? word_recompose(st->word, n, buf) : encode_cps(st->word, n, buf);
    emit(st, buf, len, st->word_start, st->word_end, 0);
}

/* ---- the state machine --------------------------------------------------------------------------------- */

static void step(tok_state *st, uint32_t cp, char_class cls, size_t start, size_t end) {
    switch (cls) {
    case CL_CJK:
        word_close(st);
        run_add(st, cp, start, end);
        break;
    case CL_WORD:
        run_close(st);
        if (!st->word_open) {
            word_open(st, cp, start, end);
        } else if (!st->joiner) {
            word_append(st, cp, end);
        } else {
            bool joins = st->joiner == '.' ? is_digit(st->word_last) && is_digit(cp)
                                           : !is_digit(st->word_last) && !is_digit(cp);
            if (joins) {
                word_append(st, st->joiner, end);
                word_append(st, cp, end);
                st->joiner = 0;
            } else {
                word_close(st);
                word_open(st, cp, start, end);
            }
        }
        break;
    case CL_MARK:
        if (st->word_open && !st->joiner) {
            word_append(st, cp, end);
            st->word_marks = true;
        }
        break;
    case CL_DOT:
    case CL_APOS:
        run_close(st);
        if (st->word_open && !st->joiner) st->joiner = cls == CL_DOT ? '.' : '\'';
        else word_close(st);
        break;
    case CL_SEP:
        run_close(st);
        word_close(st);
        break;
    }
}

int cq_fts_cjk_tokenize(const char *text, size_t len, cq_fts_cjk_mode mode, cq_token_cb cb, void *ctx) {
    tok_state st = {.cb = cb, .ctx = ctx, .query = mode == CQ_FTS_CJK_QUERY};
    size_t i = 0;
    while (i < len && !st.rc) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x80) {
            uint32_t lower = (c >= 'A' && c <= 'Z') ? c + 32u : c;
            step(&st, lower, ascii_class(c), i, i + 1);
            i++;
            continue;
        }
        size_t n;
        uint32_t cp = cq_utf8_decode(text + i, len - i, &n);
        if ((cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3041 && cp <= 0x3096) || (cp >= 0x30A1 && cp <= 0x30FA)) {
            /* Han (main block) and plain kana: NFKC and case fold leave them as they are. */
            step(&st, cp, CL_CJK, i, i + n);
        } else if (cp == CQ_UTF8_REPLACEMENT && n == 1) {
            step(&st, ' ', CL_SEP, i, i + n); /* invalid UTF-8 */
        } else {
            uint32_t folded[FOLD_MAX];
            size_t nf = fold_slow(cp, folded);
            for (size_t k = 0; k < nf; k++) step(&st, folded[k], classify(folded[k]), i, i + n);
        }
        i += n;
    }
    run_close(&st);
    word_close(&st);
    return st.rc;
}

/* ---- tokens made ahead ------------------------------------------------------------------------------------ */

typedef struct {
    cq_fts_tokens *t;
    size_t cap, cap_bytes, n_bytes;
    bool failed;
} tokens_build;

static int collect_token(void *ctx, const char *tok, size_t len, size_t start, size_t end, unsigned flags) {
    tokens_build *b = ctx;
    cq_fts_tokens *t = b->t;
    b->failed = !cq_grow((void **)&t->tokens, &b->cap, t->n + 1, sizeof *t->tokens) ||
                !cq_grow((void **)&t->bytes, &b->cap_bytes, b->n_bytes + len, 1);
    if (b->failed) return 1;
    memcpy(t->bytes + b->n_bytes, tok, len);
    t->tokens[t->n++] = (struct cq_fts_token){(uint32_t)b->n_bytes, (uint32_t)len, (uint32_t)start, (uint32_t)end,
                                              flags};
    b->n_bytes += len;
    return 0;
}

cq_status cq_fts_tokens_make(const char *text, size_t len, cq_fts_tokens *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    /* offsets and token bytes fit 32 bits: a token's bytes are at most 18 folded code points a character */
    if (len > UINT32_MAX / 72) return cq_err_set(err, CQ_ERR_TOO_LARGE, "fts_cjk: a text of %zu bytes", len);
    out->text = text;
    out->len = len;
    tokens_build b = {.t = out};
    cq_fts_cjk_tokenize(text, len, CQ_FTS_CJK_DOCUMENT, collect_token, &b);
    if (b.failed) {
        cq_fts_tokens_free(out);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    return CQ_OK;
}

void cq_fts_tokens_free(cq_fts_tokens *t) {
    free(t->bytes);
    free(t->tokens);
    memset(t, 0, sizeof *t);
}

static _Thread_local const cq_fts_tokens *offered;

void cq_fts_tokens_offer(const cq_fts_tokens *t) { offered = t; }

/* ---- FTS5 glue ------------------------------------------------------------------------------------------- */

typedef struct {
    void *fts_ctx;
    int (*x_token)(void *, int, const char *, int, int, int);
} fts5_sink;

static int fts5_sink_token(void *ctx, const char *tok, size_t len, size_t start, size_t end, unsigned flags) {
    fts5_sink *sink = ctx;
    return sink->x_token(sink->fts_ctx, (flags & CQ_FTS_TOK_COLOCATED) ? FTS5_TOKEN_COLOCATED : 0, tok, (int)len,
                         (int)start, (int)end);
}

/* The tokenizer has no state and no options: every table shares one instance. */
static struct {
    int unused;
} cjk_instance;

static int cjk_create(void *user, const char **args, int n_args, Fts5Tokenizer **out) {
    (void)user, (void)args;
    if (n_args > 0) return SQLITE_ERROR;
    *out = (Fts5Tokenizer *)&cjk_instance;
    return SQLITE_OK;
}

static void cjk_delete(Fts5Tokenizer *tokenizer) { (void)tokenizer; }

static int cjk_tokenize(Fts5Tokenizer *tokenizer, void *fts_ctx, int flags, const char *text, int n_text,
                        int (*x_token)(void *, int, const char *, int, int, int)) {
    (void)tokenizer;
    if (n_text <= 0) return SQLITE_OK;
    fts5_sink sink = {fts_ctx, x_token};
    cq_fts_cjk_mode mode = (flags & FTS5_TOKENIZE_QUERY) ? CQ_FTS_CJK_QUERY : CQ_FTS_CJK_DOCUMENT;
    const cq_fts_tokens *t = offered;
    if (mode == CQ_FTS_CJK_DOCUMENT && t && t->len == (size_t)n_text && !memcmp(t->text, text, t->len)) {
        for (size_t i = 0; i < t->n; i++) {
            const struct cq_fts_token *k = &t->tokens[i];
            int rc = fts5_sink_token(&sink, t->bytes + k->off, k->len, k->start, k->end, k->flags);
            if (rc) return rc;
        }
        return SQLITE_OK;
    }
    return cq_fts_cjk_tokenize(text, (size_t)n_text, mode, fts5_sink_token, &sink);
}

cq_status cq_fts5_api(sqlite3 *db, fts5_api **out, cq_err *err) {
    *out = NULL;
    if (!db) return cq_err_set(err, CQ_ERR_INVALID, "fts5: no database handle");
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &stmt, NULL) != SQLITE_OK)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "fts5: this SQLite has no FTS5: %s", sqlite3_errmsg(db));
    sqlite3_bind_pointer(stmt, 1, out, "fts5_api_ptr", NULL);
    int rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    if (rc != SQLITE_ROW || !*out)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "fts5: cannot get the fts5_api pointer: %s", sqlite3_errstr(rc));
    return CQ_OK;
}

cq_status cq_fts_cjk_register(sqlite3 *db, cq_err *err) {
    static fts5_tokenizer cjk = {cjk_create, cjk_delete, cjk_tokenize};
    fts5_api *api;
    cq_status s = cq_fts5_api(db, &api, err);
    if (s) {
        if (err) cq_err_prefix(err, "fts_cjk: ");
        return s;
    }
    int rc = api->xCreateTokenizer(api, "cjk", NULL, &cjk, NULL);
    if (rc != SQLITE_OK) return cq_err_set(err, CQ_ERR_DB, "fts_cjk: cannot register tokenizer cjk: %s", sqlite3_errstr(rc));
    return CQ_OK;
}
