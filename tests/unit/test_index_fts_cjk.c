/* index/fts_cjk: token rules, offsets into the original bytes, FTS5 behaviour (MATCH, phrases, bm25,
 * highlight), hostile input, and tokenizer throughput. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "core/strbuf.h"
#include "core/text_norm.h"
#include "core/utf8.h"
#include "store/fts_cjk.h"

/* ---- helpers ------------------------------------------------------------------------------------------ */

/* Renders tokens as "tok@start-end" separated by spaces; colocated tokens get a leading '+', query tails a
 * trailing '$'. with_offsets = false drops the "@start-end". */
typedef struct {
    cq_strbuf out;
    int with_offsets;
} render_ctx;

static int render_cb(void *ctx, const char *tok, size_t len, size_t start, size_t end, unsigned flags) {
    render_ctx *r = ctx;
    if (r->out.len) cq_strbuf_puts(&r->out, " ");
    if (flags & CQ_FTS_TOK_COLOCATED) cq_strbuf_puts(&r->out, "+");
    cq_strbuf_append(&r->out, tok, len);
    if (flags & CQ_FTS_TOK_TAIL) cq_strbuf_puts(&r->out, "$");
    if (r->with_offsets) cq_strbuf_printf(&r->out, "@%zu-%zu", start, end);
    return 0;
}

static char *render(const char *text, cq_fts_cjk_mode mode, int with_offsets) {
    render_ctx r = {{0}, with_offsets};
    assert_int_equal(cq_fts_cjk_tokenize(text, strlen(text), mode, render_cb, &r), 0);
    assert_false(r.out.failed);
    return cq_strbuf_take(&r.out);
}

static void expect_tokens(const char *text, cq_fts_cjk_mode mode, int with_offsets, const char *want) {
    char *got = render(text, mode, with_offsets);
    if (strcmp(got, want) != 0) print_error("text: %s\n got: %s\nwant: %s\n", text, got, want);
    assert_string_equal(got, want);
    free(got);
}

/* ---- token rules ------------------------------------------------------------------------------------ */

static void test_mixed_document(void **state) {
    (void)state;
    /* 第(0)十(3)二(6)条(9) ' '(12) 员(13)工(16)加(19)班(22)费(25) A(28)B C -(31) 1(32)2 ' '(34) 7(35).2 节(38) */
    expect_tokens("第十二条 员工加班费ABC-12 7.2节", CQ_FTS_CJK_DOCUMENT, 1,
                  "第@0-3 +第十@0-3 十@3-6 +十二@3-6 二@6-9 +二条@6-9 条@9-12 "
                  "员@13-16 +员工@13-16 工@16-19 +工加@16-19 加@19-22 +加班@19-22 班@22-25 +班费@22-25 费@25-28 "
                  "abc@28-31 12@32-34 7.2@35-38 节@38-41");
}

static void test_mixed_query(void **state) {
    (void)state;
    expect_tokens("第十二条 员工加班费ABC-12 7.2节", CQ_FTS_CJK_QUERY, 1,
                  "第十@0-6 十二@3-9 二条@6-12 条$@9-12 员工@13-19 工加@16-22 加班@19-25 班费@22-28 费$@25-28 "
                  "abc@28-31 12@32-34 7.2@35-38 节@38-41");
    expect_tokens("加班费", CQ_FTS_CJK_QUERY, 0, "加班 班费"); /* a run at the end of the query has no tail */
    expect_tokens("税", CQ_FTS_CJK_QUERY, 0, "税");
    expect_tokens("税", CQ_FTS_CJK_DOCUMENT, 0, "税");
}

static void test_isolated_characters_and_numbers(void **state) {
    (void)state;
    expect_tokens("2017年5月1日起施行", CQ_FTS_CJK_QUERY, 0, "2017 年 5 月 1 日起 起施 施行");
    expect_tokens("第3条、第4条", CQ_FTS_CJK_DOCUMENT, 0, "第 3 条 第 4 条");
    /* '.' joins digits only; a trailing or doubled dot does not; comma separates */
    expect_tokens("Section 7.2. See 3.1.4, 1,000 and v1.2 e.g. 7..2", CQ_FTS_CJK_QUERY, 0,
                  "section 7.2 see 3.1.4 1 000 and v1.2 e g 7 2");
}

static void test_punctuation_breaks_runs(void **state) {
    (void)state;
    expect_tokens("加班，费用（试行）《劳动法》", CQ_FTS_CJK_QUERY, 0, "加班 班$ 费用 用$ 试行 行$ 劳动 动法");
    expect_tokens("加班 费", CQ_FTS_CJK_DOCUMENT, 0, "加 +加班 班 费");
}

static void test_fullwidth_and_radicals(void **state) {
    (void)state;
    /* Ａ Ｂ Ｃ － １ ２ 　 ７ ． ２ : three bytes each */
    expect_tokens("ＡＢＣ－１２　７．２", CQ_FTS_CJK_QUERY, 1, "abc@0-9 12@12-18 7.2@21-30");
    /* ⽇ U+2F47 (Kangxi radical, NFKC) and ⺟ U+2E9F (radical supplement, repair table) */
    expect_tokens("⽇本⺟亲", CQ_FTS_CJK_QUERY, 1, "日本@0-6 本母@3-9 母亲@6-12");
    /* compatibility ideograph U+F9A8 (令) */
    expect_tokens("\xEF\xA6\xA8状", CQ_FTS_CJK_QUERY, 0, "令状");
    /* one character folding to two: ㍻ → 平成; positions stay non-overlapping in documents */
    expect_tokens("㍻元年", CQ_FTS_CJK_DOCUMENT, 1, "平@0-3 +平成@0-3 成@3-3 +成元@3-3 元@3-6 +元年@3-6 年@6-9");
}

static void test_english_words(void **state) {
    (void)state;
    expect_tokens("The Employer's NON-COMPETE obligations don't apply; rock’n’roll employees' 2nd", CQ_FTS_CJK_QUERY,
                  0, "the employer non compete obligations don't apply rock'n'roll employees 2nd");
    /* the possessive is dropped from the token, not from the span */
    expect_tokens("Employer's duty", CQ_FTS_CJK_QUERY, 1, "employer@0-10 duty@11-15");
    expect_tokens("under_score a/b #tag", CQ_FTS_CJK_QUERY, 0, "under score a b tag");
}

static void test_unicode_words(void **state) {
    (void)state;
    /* decomposed and precomposed é agree; ß case-folds to ss; Greek, Cyrillic, Hangul are words */
    expect_tokens("Cafe\xCC\x81 café STRASSE Straße ΣΟΦΊΑ Москва 대한민국", CQ_FTS_CJK_QUERY, 0,
                  "café café strasse strasse σοφία москва 대한민국");
    /* ① → 1, Ⅻ → xii, ﬁ → fi */
    expect_tokens("① Ⅻ ﬁnal", CQ_FTS_CJK_QUERY, 0, "1 xii final");
    /* kana are bigrammed like Han; zero-width characters and soft hyphens join */
    expect_tokens("データ", CQ_FTS_CJK_QUERY, 0, "デー ータ");
    expect_tokens("加\xE2\x80\x8B班 com\xC2\xADpete", CQ_FTS_CJK_QUERY, 1, "加班@0-9 班$@6-9 compete@10-19");
}

static void test_long_word_is_cut(void **state) {
    (void)state;
    char text[130];
    memset(text, 'A', 100);
    text[100] = 0;
    char want[CQ_FTS_CJK_MAX_WORD_CHARS + 16];
    memset(want, 'a', CQ_FTS_CJK_MAX_WORD_CHARS);
    snprintf(want + CQ_FTS_CJK_MAX_WORD_CHARS, 16, "@0-100");
    expect_tokens(text, CQ_FTS_CJK_DOCUMENT, 1, want);
}

static void test_invalid_utf8_separates(void **state) {
    (void)state;
    expect_tokens("ab\xFF" "cd\xE5\x8A", CQ_FTS_CJK_QUERY, 1, "ab@0-2 cd@3-5");
    expect_tokens("加\x80班\xC0\xAF费", CQ_FTS_CJK_QUERY, 0, "加 班 费");
    expect_tokens("", CQ_FTS_CJK_DOCUMENT, 0, "");
    expect_tokens(" \t，。\n", CQ_FTS_CJK_DOCUMENT, 0, "");
}

/* Every positioned token's source bytes fold to the token (words and unigrams; bigrams checked by parts). */
typedef struct {
    const char *text;
    int checked;
} fold_check_ctx;

static int fold_check_cb(void *ctx, const char *tok, size_t len, size_t start, size_t end, unsigned flags) {
    fold_check_ctx *c = ctx;
    char *folded = cq_text_fold(c->text + start, end - start);
    assert_non_null(folded);
    char *key = cq_text_norm_key(folded, strlen(folded));
    assert_non_null(key);
    /* the folded slice may carry a joined "'s" or zero-width characters; the token is its alphanumeric core */
    if (!(flags & CQ_FTS_TOK_COLOCATED)) {
        if (strncmp(key, tok, len) != 0) print_error("slice [%zu,%zu) folds to '%s', token '%.*s'\n", start, end, key,
                                                     (int)len, tok);
        assert_memory_equal(key, tok, len);
    }
    free(key);
    free(folded);
    c->checked++;
    return 0;
}

static void test_offsets_point_into_original(void **state) {
    (void)state;
    const char *text = "《ＸＸ省数字经济促进条例》第三章第十二条：Ｅｍｐｌｏｙｅｅ Overtime ⽇本 Section ７．２ applies.";
    fold_check_ctx c = {text, 0};
    assert_int_equal(cq_fts_cjk_tokenize(text, strlen(text), CQ_FTS_CJK_DOCUMENT, fold_check_cb, &c), 0);
    assert_true(c.checked > 20);
}

static int stop_at_third(void *ctx, const char *tok, size_t len, size_t start, size_t end, unsigned flags) {
    (void)tok, (void)len, (void)start, (void)end, (void)flags;
    int *calls = ctx;
    return ++*calls == 3 ? 42 : 0;
}

static void test_callback_stops(void **state) {
    (void)state;
    int calls = 0;
    const char *text = "one two three four five";
    assert_int_equal(cq_fts_cjk_tokenize(text, strlen(text), CQ_FTS_CJK_QUERY, stop_at_third, &calls), 42);
    assert_int_equal(calls, 3);
}

/* ---- hostile input ---------------------------------------------------------------------------------- */

typedef struct {
    size_t len;
    int query;       /* query offsets may overlap (bigrams): check bounds only */
    size_t last_end; /* document mode: end of the previous positioned token */
} fuzz_ctx;

static int fuzz_cb(void *ctx, const char *tok, size_t len, size_t start, size_t end, unsigned flags) {
    fuzz_ctx *f = ctx;
    assert_true(len > 0 && len <= 4 * CQ_FTS_CJK_MAX_WORD_CHARS);
    assert_true(cq_utf8_valid(tok, len));
    assert_true(start <= end && end <= f->len);
    if (!f->query && !(flags & CQ_FTS_TOK_COLOCATED)) {
        assert_true(start >= f->last_end); /* document positions never overlap */
        f->last_end = end;
    }
    return 0;
}

static void fuzz_one(const char *buf, size_t n) {
    fuzz_ctx doc = {n, 0, 0}, query = {n, 1, 0};
    assert_int_equal(cq_fts_cjk_tokenize(buf, n, CQ_FTS_CJK_DOCUMENT, fuzz_cb, &doc), 0);
    assert_int_equal(cq_fts_cjk_tokenize(buf, n, CQ_FTS_CJK_QUERY, fuzz_cb, &query), 0);
}

static void test_fuzz_random_bytes(void **state) {
    (void)state;
    /* bytes biased toward what matters: ASCII letters, digits, joiners, UTF-8 lead and continuation bytes */
    static const unsigned char alphabet[] = "aZ09.'- \xE4\xB8\xAD\xE5\x8A\xA0\xEF\xBC\xA1\xC3\xA9\xCC\x81\xF0\x9F\x98\x80\x80\xBF\xFF\xC0\xE2";
    srand(12345);
    char buf[96];
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = (size_t)(rand() % (int)sizeof buf);
        for (size_t i = 0; i < n; i++)
            buf[i] = (char)((rand() & 3) ? alphabet[rand() % (int)(sizeof alphabet - 1)] : rand() & 0xFF);
        fuzz_one(buf, n);
    }
}

static void test_fuzz_random_code_points(void **state) {
    (void)state;
    /* valid UTF-8 of code points from every plane, to run every fold path */
    srand(777);
    char buf[256];
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = 0;
        int chars = rand() % 40;
        for (int k = 0; k < chars; k++) {
            uint32_t cp;
            switch (rand() % 4) {
            case 0: cp = (uint32_t)(rand() % 0x80); break;
            case 1: cp = 0x80 + (uint32_t)(rand() % 0x3000); break;
            case 2: cp = 0x2E80 + (uint32_t)(rand() % (0x10000 - 0x2E80)); break;
            default: cp = (uint32_t)(rand() % 0x110000); break;
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
            n += cq_utf8_encode(cp, buf + n);
        }
        fuzz_one(buf, n);
    }
    /* every single code point once */
    for (uint32_t cp = 1; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        size_t n = cq_utf8_encode(cp, buf);
        buf[n] = 'a';
        fuzz_one(buf, n + 1);
    }
}

/* ---- SQLite FTS5 ------------------------------------------------------------------------------------ */

static sqlite3 *open_db(void) {
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
    cq_err err = {0};
    assert_int_equal(cq_fts_cjk_register(db, &err), CQ_OK);
    return db;
}

static void exec(sqlite3 *db, const char *sql) {
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) print_error("%s: %s\n", sql, msg ? msg : "?");
    sqlite3_free(msg);
    assert_int_equal(rc, SQLITE_OK);
}

/* Runs a one-column query with one text parameter and returns the rows joined by '|'. */
static char *query_rows(sqlite3 *db, const char *sql, const char *param) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK) print_error("%s: %s\n", sql, sqlite3_errmsg(db));
    assert_int_equal(rc, SQLITE_OK);
    if (param) sqlite3_bind_text(st, 1, param, -1, SQLITE_STATIC);
    cq_strbuf out = {0};
    int first = 1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (!first) cq_strbuf_puts(&out, "|");
        first = 0;
        const unsigned char *v = sqlite3_column_text(st, 0);
        cq_strbuf_puts(&out, v ? (const char *)v : "NULL");
    }
    if (rc != SQLITE_DONE) print_error("%s [%s]: %s\n", sql, param ? param : "", sqlite3_errmsg(db));
    assert_int_equal(rc, SQLITE_DONE);
    sqlite3_finalize(st);
    return cq_strbuf_take(&out);
}

static void expect_rows(sqlite3 *db, const char *sql, const char *param, const char *want) {
    char *got = query_rows(db, sql, param);
    if (strcmp(got, want) != 0) print_error("%s [%s]\n got: %s\nwant: %s\n", sql, param ? param : "", got, want);
    assert_string_equal(got, want);
    free(got);
}

static const char *const corpus[] = {
    "第四十四条 员工加班费的计算，按照本法规定。",                                          /* 1 */
    "加班、费用由用人单位承担。",                                                          /* 2 */
    "个人所得税的税率。",                                                                  /* 3 */
    "The Employer may terminate this Agreement. Termination requires notice under Section 7.2.", /* 4 */
    "Section 7.3 covers TERMINATION fees.",                                                /* 5 */
    "纳税人应当缴纳税款",                                                                  /* 6 */
    "支付人民币100元罚款",                                                                 /* 7 */
    "加班时间和值班费标准",                                                                /* 8 */
    "ＡＢＣ公司的⽇常管理",                                                                /* 9 */
};

static int setup_corpus(void **state) {
    sqlite3 *db = open_db();
    exec(db, "CREATE VIRTUAL TABLE t USING fts5(body, tokenize='cjk')");
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO t(rowid, body) VALUES(?, ?)", -1, &st, NULL), SQLITE_OK);
    for (size_t i = 0; i < sizeof corpus / sizeof corpus[0]; i++) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)(i + 1));
        sqlite3_bind_text(st, 2, corpus[i], -1, SQLITE_STATIC);
        assert_int_equal(sqlite3_step(st), SQLITE_DONE);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    *state = db;
    return 0;
}

static int teardown_db(void **state) {
    sqlite3_close(*state);
    return 0;
}

#define MATCH_IDS "SELECT rowid FROM t WHERE t MATCH ?1 ORDER BY rowid"
#define HIGHLIGHT "SELECT highlight(t, 0, '[', ']') FROM t WHERE t MATCH ?1 ORDER BY rowid"

static void test_match_cjk(void **state) {
    sqlite3 *db = *state;
    expect_rows(db, MATCH_IDS, "加班", "1|2|8");
    expect_rows(db, MATCH_IDS, "加班费", "1");          /* a bare string is a phrase in FTS5 */
    expect_rows(db, MATCH_IDS, "\"加班费\"", "1");
    expect_rows(db, MATCH_IDS, "\"加班\" \"班费\"", "1|8"); /* loose: both bigrams, anywhere */
    expect_rows(db, MATCH_IDS, "费用", "2");
    expect_rows(db, MATCH_IDS, "税", "3|6");             /* single characters: run ends and run middles */
    expect_rows(db, MATCH_IDS, "得税", "3");
    expect_rows(db, MATCH_IDS, "\"加\"*", "1|2|8");
    expect_rows(db, MATCH_IDS, "\"人民币100元\"", "7"); /* a phrase across a run's end */
    expect_rows(db, MATCH_IDS, "日常", "9");            /* ⽇ was folded at indexing */
    expect_rows(db, MATCH_IDS, "⽇常", "9");            /* and is folded in the query */
    expect_rows(db, MATCH_IDS, "加班 NOT 班费", "2");   /* 8 has 班费 in 值班费 */
    /* NEAR counts positions, i.e. characters in CJK text: 时间和值班费 lie between 加班 and 标准 */
    /* 加班 … 标准: a CJK phrase ending its query string takes one position less than its characters */
    expect_rows(db, MATCH_IDS, "NEAR(加班 标准, 7)", "8");
    expect_rows(db, MATCH_IDS, "NEAR(加班 标准, 6)", "");
    expect_rows(db, MATCH_IDS, "NEAR(加班 标准, 5)", "");
}

static void test_match_english(void **state) {
    sqlite3 *db = *state;
    expect_rows(db, MATCH_IDS, "termination", "4|5");
    expect_rows(db, MATCH_IDS, "TERMINATE", "4");
    expect_rows(db, MATCH_IDS, "ＴＥＲＭＩＮＡＴＩＯＮ", "4|5");
    expect_rows(db, MATCH_IDS, "\"7.2\"", "4");
    expect_rows(db, MATCH_IDS, "\"section 7.3\"", "5");
    expect_rows(db, MATCH_IDS, "termin*", "4|5");
    expect_rows(db, MATCH_IDS, "abc", "9");
    expect_rows(db, MATCH_IDS, "\"employer may\"", "4");
}

static void test_highlight(void **state) {
    sqlite3 *db = *state;
    /* A phrase that ends its query string with a CJK run highlights all but that run's last character (the
     * query has no tail unigram there); spans never overlap, so the rest of the text stays intact. */
    expect_rows(db, HIGHLIGHT, "加班费", "第四十四条 员工[加班]费的计算，按照本法规定。");
    expect_rows(db, HIGHLIGHT, "\"加班\" \"班费\"",
                "第四十四条 员工[加][班]费的计算，按照本法规定。|[加]班时间和值[班]费标准");
    expect_rows(db, HIGHLIGHT, "税", "个人所得[税]的[税]率。|纳[税]人应当缴纳[税]款");
    expect_rows(db, HIGHLIGHT, "\"人民币100元\"", "支付[人民币100元]罚款");
    expect_rows(db, HIGHLIGHT, "termination",
                "The Employer may terminate this Agreement. [Termination] requires notice under Section 7.2.|"
                "Section 7.3 covers [TERMINATION] fees.");
    expect_rows(db, HIGHLIGHT, "abc 日常", "[ＡＢＣ]公司的[⽇]常管理"); /* spans cover the original bytes */
    expect_rows(db, "SELECT snippet(t, 0, '[', ']', '…', 4) FROM t WHERE t MATCH ?1", "加班费", "…工[加班]费…");
}

static void test_document_positions(void **state) {
    sqlite3 *db = *state;
    /* unigram and bigram of a character share a position; the run's last character has its unigram only */
    exec(db, "CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)");
    expect_rows(db, "SELECT term || ':' || offset FROM v WHERE doc = 8 AND offset < 3 ORDER BY offset, term", NULL,
                "加:0|加班:0|班:1|班时:1|时:2|时间:2");
    expect_rows(db, "SELECT term || ':' || offset FROM v WHERE doc = 7 ORDER BY offset, term", NULL,
                "支:0|支付:0|付:1|付人:1|人:2|人民:2|民:3|民币:3|币:4|100:5|元:6|元罚:6|罚:7|罚款:7|款:8");
}

/* Every (term, row, offset) of a table, in order, one a line. */
static char *instances(sqlite3 *db, const char *vocab) {
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT term, doc, col, offset FROM %s ORDER BY doc, col, offset, term", vocab);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    cq_strbuf b = {0};
    while (sqlite3_step(st) == SQLITE_ROW)
        cq_strbuf_printf(&b, "%s %lld %s %d\n", (const char *)sqlite3_column_text(st, 0),
                         (long long)sqlite3_column_int64(st, 1), (const char *)sqlite3_column_text(st, 2),
                         sqlite3_column_int(st, 3));
    sqlite3_finalize(st);
    return cq_strbuf_take(&b);
}

/* Tokens made ahead and offered (a batch ingest's workers and writer) index exactly what the tokenizer would; a
 * text other than the offered one is tokenized as usual. */
static void test_tokens_made_ahead(void **state) {
    (void)state;
    sqlite3 *db = open_db();
    exec(db, "CREATE VIRTUAL TABLE a USING fts5(body, tokenize='cjk'); CREATE VIRTUAL TABLE b USING fts5(body, "
             "tokenize='cjk'); CREATE VIRTUAL TABLE va USING fts5vocab(a, instance); CREATE VIRTUAL TABLE vb USING "
             "fts5vocab(b, instance)");
    sqlite3_stmt *ia = NULL, *ib = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO a(rowid, body) VALUES(?, ?)", -1, &ia, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO b(rowid, body) VALUES(?, ?)", -1, &ib, NULL), SQLITE_OK);
    size_t n = sizeof corpus / sizeof corpus[0];
    for (size_t i = 0; i < n; i++) {
        cq_fts_tokens t;
        cq_err err = {0};
        assert_int_equal(cq_fts_tokens_make(corpus[i], strlen(corpus[i]), &t, &err), CQ_OK);
        assert_true(t.n > 0);
        sqlite3_bind_int64(ia, 1, (sqlite3_int64)(i + 1));
        sqlite3_bind_text(ia, 2, corpus[i], -1, SQLITE_STATIC);
        assert_int_equal(sqlite3_step(ia), SQLITE_DONE);
        sqlite3_reset(ia);
        /* b: each row offered its own tokens, but the last the tokens of another text */
        cq_fts_tokens other;
        assert_int_equal(cq_fts_tokens_make(corpus[(i + 1) % n], strlen(corpus[(i + 1) % n]), &other, &err), CQ_OK);
        cq_fts_tokens_offer(i + 1 < n ? &t : &other);
        sqlite3_bind_int64(ib, 1, (sqlite3_int64)(i + 1));
        sqlite3_bind_text(ib, 2, corpus[i], -1, SQLITE_STATIC);
        assert_int_equal(sqlite3_step(ib), SQLITE_DONE);
        sqlite3_reset(ib);
        cq_fts_tokens_offer(NULL);
        cq_fts_tokens_free(&t);
        cq_fts_tokens_free(&other);
    }
    sqlite3_finalize(ia);
    sqlite3_finalize(ib);
    char *got_a = instances(db, "va"), *got_b = instances(db, "vb");
    assert_true(strlen(got_a) > 100);
    assert_string_equal(got_a, got_b);
    free(got_a);
    free(got_b);
    sqlite3_close(db);
}

/* bm25() of one row for one query (more negative is better). */
static double row_score(sqlite3 *db, const char *match, sqlite3_int64 rowid) {
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT bm25(r) FROM r WHERE r MATCH ?1 AND rowid = ?2", -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, match, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, rowid);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    double score = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return score;
}

static void test_bm25_order(void **state) {
    (void)state;
    sqlite3 *db = open_db();
    exec(db, "CREATE VIRTUAL TABLE r USING fts5(body, tokenize='cjk');"
             "INSERT INTO r(rowid, body) VALUES"
             "(1, '劳动合同的订立与变更，用人单位与劳动者协商一致，可以变更劳动合同约定的内容。'),"
             "(2, '加班费按照下列标准支付：安排劳动者延长工作时间的，支付不低于工资的百分之一百五十的加班费；"
             "休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的加班费。'),"
             "(3, '用人单位应当支付加班费。'),"
             "(4, '本条例自公布之日起施行。')");
    /* the short clause about overtime pay first, the long one with three mentions next, unrelated rows never */
    expect_rows(db, "SELECT rowid FROM r WHERE r MATCH ?1 ORDER BY bm25(r)", "加班费", "3|2");
    expect_rows(db, "SELECT rowid FROM r WHERE r MATCH ?1 ORDER BY bm25(r)", "劳动者 加班费", "2");
    /* in the same row, the rarer term (补休, one row) outweighs the common one (劳动者, two rows, three times) */
    double rare = row_score(db, "补休", 2), common = row_score(db, "劳动者", 2);
    assert_true(rare < 0 && common < 0 && rare < common);
    sqlite3_close(db);
}

static void test_register_errors(void **state) {
    (void)state;
    cq_err err = {0};
    assert_int_equal(cq_fts_cjk_register(NULL, &err), CQ_ERR_INVALID);
    assert_true(strlen(err.msg) > 0);
    assert_int_equal(cq_fts_cjk_register(NULL, NULL), CQ_ERR_INVALID);

    sqlite3 *db = open_db();
    assert_int_equal(cq_fts_cjk_register(db, &err), CQ_OK); /* twice is fine */
    /* the tokenizer takes no options */
    assert_int_not_equal(sqlite3_exec(db, "CREATE VIRTUAL TABLE bad USING fts5(body, tokenize='cjk extra')", NULL, NULL,
                                      NULL),
                         SQLITE_OK);
    /* invalid UTF-8 stored as text: indexed around, no crash */
    exec(db, "CREATE VIRTUAL TABLE t USING fts5(body, tokenize='cjk')");
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO t(rowid, body) VALUES(1, ?)", -1, &st, NULL), SQLITE_OK);
    static const char bad[] = "加班\xFF\xFE费 ab\xC3";
    sqlite3_bind_text(st, 1, bad, (int)sizeof bad - 1, SQLITE_STATIC);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    expect_rows(db, "SELECT rowid FROM t WHERE t MATCH ?1", "加班", "1");
    expect_rows(db, "SELECT rowid FROM t WHERE t MATCH ?1", "ab", "1");
    char *hl = query_rows(db, "SELECT highlight(t, 0, '[', ']') FROM t WHERE t MATCH ?1", "费");
    assert_non_null(strstr(hl, "[费]"));
    free(hl);
    sqlite3_close(db);
}

/* ---- throughput ----------------------------------------------------------------------------------- */

static int count_cb(void *ctx, const char *tok, size_t len, size_t start, size_t end, unsigned flags) {
    (void)tok, (void)len, (void)start, (void)end, (void)flags;
    ++*(size_t *)ctx;
    return 0;
}

static void test_throughput(void **state) {
    (void)state;
    /* a law-like mix: mostly Han with full-width punctuation, some numbers and Latin */
    static const char para[] =
        "第四十四条 有下列情形之一的，用人单位应当按照下列标准支付高于劳动者正常工作时间工资的工资报酬："
        "（一）安排劳动者延长工作时间的，支付不低于工资的百分之一百五十的工资报酬；"
        "（二）休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬。"
        "See Section 7.2 of the Employment Agreement (2017 revision), clause 3.1.4.\n";
    size_t para_len = sizeof para - 1, target = 8u << 20;
    size_t reps = target / para_len;
    char *buf = malloc(reps * para_len);
    assert_non_null(buf);
    for (size_t i = 0; i < reps; i++) memcpy(buf + i * para_len, para, para_len);
    size_t n = reps * para_len, tokens = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cq_fts_cjk_tokenize(buf, n, CQ_FTS_CJK_DOCUMENT, count_cb, &tokens);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    print_message("fts_cjk: tokenized %.1f MB (document mode, one thread) in %.3f s: %.1f MB/s, %zu tokens\n",
                  (double)n / 1e6, s, (double)n / 1e6 / s, tokens);
    assert_true(tokens > n / 8);
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_document),
        cmocka_unit_test(test_tokens_made_ahead),
        cmocka_unit_test(test_mixed_query),
        cmocka_unit_test(test_isolated_characters_and_numbers),
        cmocka_unit_test(test_punctuation_breaks_runs),
        cmocka_unit_test(test_fullwidth_and_radicals),
        cmocka_unit_test(test_english_words),
        cmocka_unit_test(test_unicode_words),
        cmocka_unit_test(test_long_word_is_cut),
        cmocka_unit_test(test_invalid_utf8_separates),
        cmocka_unit_test(test_offsets_point_into_original),
        cmocka_unit_test(test_callback_stops),
        cmocka_unit_test(test_fuzz_random_bytes),
        cmocka_unit_test(test_fuzz_random_code_points),
        cmocka_unit_test_setup_teardown(test_match_cjk, setup_corpus, teardown_db),
        cmocka_unit_test_setup_teardown(test_match_english, setup_corpus, teardown_db),
        cmocka_unit_test_setup_teardown(test_highlight, setup_corpus, teardown_db),
        cmocka_unit_test_setup_teardown(test_document_positions, setup_corpus, teardown_db),
        cmocka_unit_test(test_bm25_order),
        cmocka_unit_test(test_register_errors),
        cmocka_unit_test(test_throughput),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
