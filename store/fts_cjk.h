/* The `cjk` FTS5 tokenizer: Chinese (and Japanese kana) by overlapping bigrams, everything else by words.
 *
 * Folding. Each source code point is folded on its own (NFKC + case fold, plus core/text_norm's repair: CJK
 * radicals ⽇ ⺟ → 日 母, full-width ＡＢ１２ → ab12), so every folded character still knows the source bytes it
 * came from and token offsets point into the ORIGINAL text, as highlight() and snippet() need. Invalid UTF-8,
 * controls, private-use characters and U+FFFD separate tokens; zero-width characters and soft hyphens
 * (U+200B-200D, U+2060, U+FEFF, U+00AD) are skipped without separating, so 加<ZWSP>班 is still 加班.
 *
 * Token rules (on the folded text):
 *  - CJK run: a maximal sequence of Han ideographs (core/utf8.h cq_is_cjk) and kana. Every character of the run
 *    takes one position. In a document (FTS5 DOCUMENT and AUX) position i carries the unigram c[i] and,
 *    COLOCATED at the same position, the bigram c[i]c[i+1]; both carry the offsets of c[i] alone. The last
 *    character of a run carries its unigram only. In a query (FTS5 QUERY, with or without PREFIX) a run
 *    c[0..k] is the bigrams c[0]c[1] … c[k-1]c[k] at positions 0..k-1, followed by the unigram c[k] at position
 *    k (flag CQ_FTS_TOK_TAIL) only when another token follows in the same query string; a run of one character
 *    is its unigram. So
 *      document 员工加班费 → 员 员工 | 工 工加 | 加 加班 | 班 班费 | 费      (| separates positions)
 *      query    加班费     → 加班 | 班费                 query 加班费100 → 加班 | 班费 | 费 | 100
 *    and the query phrase matches wherever the three characters occur, in any longer run. Why this shape:
 *      * 2-character words are found by one token (FTS5's trigram tokenizer cannot find them at all);
 *      * 1-character queries (税) match every occurrence, not only isolated ones, with no prefix trick;
 *      * a quoted bigram ("加班") is a one-token phrase: BM25 queries that OR many bigrams cost FTS5 about half
 *        of what two-token phrases cost (measured on laws-zh: 62 ms against 130 ms for 8 terms);
 *      * offsets of neighbouring positions never overlap, so highlight() and snippet() stay well-formed
 *        (SQLite 3.40's highlight() copies the rest of the text into its output when they overlap). A phrase
 *        that ends its query string with a CJK run highlights all but that run's last character;
 *      * a query phrase may cross a run's end: "人民币100元" matches 人民币100元 (the tail keeps positions).
 *    NEAR counts positions: a CJK phrase at the end of its query string spans one position less than its
 *    characters. The cost is about two index entries per Han character instead of one (measured in
 *    tests/bench/bench_fts_cjk.c).
 *  - Word: a maximal sequence of letters and digits (ASCII, or Unicode L* / N* other than CJK), with combining
 *    marks attached (the word is then recomposed, so "cafe\u0301" and "café" are one token; marks outside a
 *    word are ignored, so half-width ｶﾞ reads カ). Inside a word, '.' between two digits joins ("7.2",
 *    "3.1.4", "v1.2": section numbers stay one token, so "7.2" does not match "7.3"; "7" alone does not match
 *    "7.2" either, "7*" does), and an apostrophe (' or ’) between two letters joins ("don't", "o'clock");
 *    a final "'s" is dropped ("Employer's" → "employer"). Hyphens,
 *    commas, slashes and all other punctuation separate: "non-compete" → "non" "compete" (adjacent, so a
 *    phrase query "non-compete" still matches), "1,000" → "1" "000". Hangul and other scripts are words.
 *    Words longer than CQ_FTS_CJK_MAX_WORD_CHARS characters are cut to that many (the offsets still cover
 *    the whole word).
 *  - Everything else (white space, punctuation, symbols) separates tokens and ends CJK runs; a CJK run next
 *    to a word needs no separator ("加班费ABC" → run 加班费, word abc).
 *
 * Queries through FTS5 syntax: every string, quoted or bare, is a phrase, so MATCH '加班费' and
 * MATCH '"加班费"' both ask for the three characters in order. A looser "all bigrams, anywhere" query is
 * MATCH '"加班" "班费"' (implicit AND of two one-token phrases). A query builder walks
 * cq_fts_cjk_tokenize(..., CQ_FTS_CJK_QUERY, ...) and quotes each token that has no CQ_FTS_TOK_TAIL flag
 * (tokens never contain '"'): FTS5 runs the same tokenizer on each quoted string, so "加班" is the single
 * token 加班 again.
 *
 * FTS5 flags: DOCUMENT and AUX tokenize as a document; QUERY and QUERY|PREFIX as a query. A prefix query
 * ("加"* or "compe"*) needs nothing special: the last token of the phrase is matched as a prefix. */
#ifndef CQ_STORE_FTS_CJK_H
#define CQ_STORE_FTS_CJK_H

#include <stddef.h>
#include <stdint.h>
#include <sqlite3.h>

#include "core/error.h"

/* Longest word token, in characters. */
#define CQ_FTS_CJK_MAX_WORD_CHARS 64

typedef enum {
    CQ_FTS_CJK_DOCUMENT = 0, /* what is indexed (and what highlight() re-tokenizes) */
    CQ_FTS_CJK_QUERY = 1,    /* a query string */
} cq_fts_cjk_mode;

/* Token flags passed to the callback. */
enum {
    CQ_FTS_TOK_COLOCATED = 1u << 0, /* document mode: same position as the previous token (the bigram at c[i]) */
    CQ_FTS_TOK_TAIL = 1u << 1,      /* query mode: the last character of a run of >= 2, after its bigrams, when
                                       another token follows in the same string */
};

/* Called once per token, in order. tok[0..len) is the folded token (UTF-8, not NUL-terminated, valid only
 * during the call); [start, end) are byte offsets into the original text. Return 0 to continue; any other
 * value stops tokenizing and is returned by cq_fts_cjk_tokenize. */
typedef int (*cq_token_cb)(void *ctx, const char *tok, size_t len, size_t start, size_t end, unsigned flags);

/* Tokenizes text[0..len) (any bytes; invalid UTF-8 separates tokens). Returns 0, or the callback's first
 * non-zero return value. Thread-safe; allocates nothing. */
int cq_fts_cjk_tokenize(const char *text, size_t len, cq_fts_cjk_mode mode, cq_token_cb cb, void *ctx);

/* A text's document-mode tokens made ahead, on any thread, for the thread that writes the text into an FTS5 table
 * to replay instead of tokenizing it again (a batch ingest: app/ingest.c tokenizes clauses on its workers, and its
 * one writer stays free of that work). */
typedef struct cq_fts_tokens {
    const char *text; /* the text they are of (borrowed: it must outlive the replay) */
    size_t len;
    char *bytes;      /* the tokens' folded bytes, end to end */
    struct cq_fts_token {
        uint32_t off, len, start, end, flags; /* its bytes[off, off + len), offsets in text, CQ_FTS_TOK_* */
    } *tokens;
    size_t n;
} cq_fts_tokens;

/* out: the tokens cq_fts_cjk_tokenize gives text[0..len) in document mode. CQ_ERR_NOMEM, CQ_ERR_TOO_LARGE (over
 * 4 GiB). Free with cq_fts_tokens_free. */
cq_status cq_fts_tokens_make(const char *text, size_t len, cq_fts_tokens *out, cq_err *err);
void cq_fts_tokens_free(cq_fts_tokens *t);
/* Until called again: when the tokenizer is asked, on this thread, for the document-mode tokens of a text that is
 * byte for byte t's, it replays t (the same tokens, flags and offsets) instead. NULL: nothing is offered. */
void cq_fts_tokens_offer(const cq_fts_tokens *t);

/* The connection's FTS5 API (SELECT fts5(?1)), for registering tokenizers and auxiliary functions.
 * CQ_ERR_UNSUPPORTED when SQLite has no FTS5. */
cq_status cq_fts5_api(sqlite3 *db, fts5_api **out, cq_err *err);

/* Registers the tokenizer as `cjk` on db, through the fts5_api pointer (SELECT fts5(?1)). Needed once per
 * connection, before the first statement that touches a table declared with tokenize='cjk'. The tokenizer
 * takes no arguments. CQ_ERR_UNSUPPORTED when SQLite has no FTS5, CQ_ERR_DB when registration fails. */
cq_status cq_fts_cjk_register(sqlite3 *db, cq_err *err);

#endif
