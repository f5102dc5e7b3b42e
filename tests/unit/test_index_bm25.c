/* index/bm25: cq_bm25_top against its plain twin cq_bm25_top_reference (FTS5's own bm25() over every matching row)
 * on a corpus built for it: the same rows, the same scores bit for bit, the same order, for every query and limit.
 * The corpus has what makes the pruned path work and what could break it: very frequent words (in most rows: idf at
 * its 1e-6 floor), frequent, middling and rare ones, words in titles and paths (column weights), identical clauses
 * (ties at the cut), English words, a term that is two tokens, a term in no row. Then the searches must be pruned
 * (two passes, frequent terms not visited) and use the connection's kept row lengths, and stay equal after the
 * database changes under them (a document added; one deleted and its row ids reused), from this connection and
 * from another. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "store/bm25.h"
#include "test_store_util.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t next_u32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* Two-character words (each one bigram token), by how many rows hold them. */
static const char *const very_frequent[] = {"规定", "应当", "法律", "国家"};
static const char *const frequent[] = {"劳动", "合同", "责任", "管理", "部门", "单位"};
static const char *const middling[] = {"工资", "加班", "休假", "保险", "赔偿", "仲裁",
                                       "解除", "试用", "培训", "安全", "卫生", "职业"};
static const char *const rare[] = {"竞业", "保密", "派遣", "童工", "孕期",
                                   "哺乳", "工伤", "残疾", "矿山", "海员"};
#define COUNT(a) (sizeof a / sizeof a[0])

static void add_words(char *text, size_t cap, const char *const *words, size_t n, int percent) {
    for (size_t i = 0; i < n; i++)
        if ((int)(next_u32() % 1000) < percent * 10) {
            strncat(text, words[i], cap - strlen(text) - 1);
            strncat(text, (next_u32() % 3) ? "，" : "。", cap - strlen(text) - 1);
        }
}

/* A document of n clauses whose texts mix the word classes; every 7th clause is the same sentence (ties). */
static void add_doc(cq_store *s, int64_t kb, int d, int n) {
    static char texts[64][512], paths[64][64], labels[64][32];
    const char *(*cl)[4] = calloc((size_t)n, sizeof *cl);
    for (int i = 0; i < n; i++) {
        char *t = texts[i];
        t[0] = 0;
        if (i % 7 == 3) {
            snprintf(t, 512, "本法自公布之日起施行，劳动合同的工资规定。");
        } else {
            add_words(t, 512, very_frequent, COUNT(very_frequent), 70);
            add_words(t, 512, frequent, COUNT(frequent), 25);
            add_words(t, 512, middling, COUNT(middling), 6);
            add_words(t, 512, rare, COUNT(rare), 1);
            if (next_u32() % 5 == 0) strncat(t, " employer notice period ", 512 - strlen(t) - 1);
            if (!t[0]) snprintf(t, 512, "第%d条。", i + 1);
        }
        snprintf(paths[i], sizeof paths[i], "%s", i % 11 == 0 ? "第一章 工资 保险" : "");
        snprintf(labels[i], sizeof labels[i], "第%d条", i + 1);
        cl[i][0] = labels[i], cl[i][1] = "", cl[i][2] = paths[i], cl[i][3] = t;
    }
    char name[64], sha[80];
    snprintf(name, sizeof name, "doc%d.md", d);
    snprintf(sha, sizeof sha, "%064d", d);
    const char *title = d % 5 == 0 ? "劳动合同法" : d % 5 == 1 ? "工伤保险条例" : "某某规定";
    test_add_doc(s, kb, name, title, sha, cl, (size_t)n);
    free(cl);
}

static const char *pick(void) {
    switch (next_u32() % 4) {
    case 0: return very_frequent[next_u32() % COUNT(very_frequent)];
    case 1: return frequent[next_u32() % COUNT(frequent)];
    case 2: return middling[next_u32() % COUNT(middling)];
    default: return rare[next_u32() % COUNT(rare)];
    }
}

typedef struct {
    int queries, pruned, kept_lengths;
} tally;

/* A random query (distinct terms) checked against the reference at several limits, over the KB and a row range. */
static void check_query(cq_store *s, int64_t kb, tally *t) {
    const char *terms[24];
    size_t n = 0, want = 2 + next_u32() % 16;
    while (n < want) {
        const char *w = next_u32() % 23 == 0 ? (next_u32() % 2 ? "employer" : "工资规定") : pick();
        if (next_u32() % 29 == 0) w = "没有这词";
        int dup = 0;
        for (size_t i = 0; i < n; i++) dup |= !strcmp(terms[i], w);
        if (!dup) terms[n++] = w;
    }
    static const size_t limits[] = {1, 5, 30, 60};
    for (size_t li = 0; li < COUNT(limits); li++) {
        for (int ranged = 0; ranged < 2; ranged++) {
            const int64_t lo = ranged ? 1 + next_u32() % 2000 : 1, hi = ranged ? lo + 300 : 0;
            cq_bm25_hit a[64], b[64];
            size_t na = 0, nb = 0;
            cq_bm25_trace tr;
            cq_err err = {0};
            assert_int_equal(cq_bm25_top_reference(s, kb, terms, n, lo, hi, limits[li], a, &na, &err), CQ_OK);
            assert_int_equal(cq_bm25_top(s, kb, terms, n, lo, hi, limits[li], b, &nb, &tr, &err), CQ_OK);
            if (na != nb || memcmp(a, b, na * sizeof *a)) {
                for (size_t i = 0; i < na || i < nb; i++)
                    fprintf(stderr, "  %2zu: %6lld %.17g | %6lld %.17g\n", i, i < na ? (long long)a[i].id : 0LL,
                            i < na ? a[i].score : 0.0, i < nb ? (long long)b[i].id : 0LL, i < nb ? b[i].score : 0.0);
                fail_msg("%zu terms, limit %zu, rows [%lld, %lld]: differs from the reference", n, limits[li],
                         (long long)lo, (long long)hi);
            }
            t->queries++;
            t->pruned += tr.passes == 2 && tr.pruned_terms > 0;
            t->kept_lengths += tr.kept_lengths;
        }
    }
}

static void test_same_as_reference(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    int64_t kb;
    assert_int_equal(cq_store_kb_create(s, "bm25", &kb, &err), CQ_OK);
    for (int d = 0; d < 60; d++) add_doc(s, kb, d, 50);
    tally t = {0};
    for (int q = 0; q < 150; q++) check_query(s, kb, &t);
    fprintf(stderr, "  %d searches: %d pruned, %d with kept row lengths\n", t.queries, t.pruned, t.kept_lengths);
    assert_true(t.pruned > t.queries / 10);
    assert_true(t.kept_lengths > t.queries / 2);

    /* changes under the kept statistics: a new document (new rows, other idf, other average length) */
    add_doc(s, kb, 60, 50);
    tally after = {0};
    for (int q = 0; q < 20; q++) check_query(s, kb, &after);
    /* the newest document deleted and another added: its row ids come back with other texts */
    cq_doc_info last;
    assert_int_equal(cq_store_doc_by_name(s, kb, "doc60.md", &last, &err), CQ_OK);
    assert_int_equal(cq_store_doc_delete(s, last.id, &err), CQ_OK);
    cq_doc_info_free(&last);
    add_doc(s, kb, 61, 50);
    for (int q = 0; q < 20; q++) check_query(s, kb, &after);
    /* a change from another connection (PRAGMA data_version) */
    cq_store *other;
    assert_int_equal(cq_store_open(test_db_path, &other, &err), CQ_OK);
    add_doc(other, kb, 62, 40);
    cq_store_close(other);
    for (int q = 0; q < 20; q++) check_query(s, kb, &after);
    assert_true(after.pruned > 0);
}

/* No term in any row (before and after the connection keeps counts), no terms, limit 0: nothing, as the
 * reference. */
static void test_nothing(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    int64_t kb;
    assert_int_equal(cq_store_kb_create(s, "empty", &kb, &err), CQ_OK);
    cq_bm25_hit h[4];
    size_t n = 9;
    const char *none[] = {"没有"};
    assert_int_equal(cq_bm25_top(s, kb, none, 1, 1, 0, 4, h, &n, NULL, &err), CQ_OK);
    assert_int_equal(n, 0);
    add_doc(s, kb, 0, 10);
    assert_int_equal(cq_bm25_top(s, kb, none, 1, 1, 0, 4, h, &n, NULL, &err), CQ_OK);
    assert_int_equal(n, 0);
    assert_int_equal(cq_bm25_top(s, kb, none, 0, 1, 0, 4, h, &n, NULL, &err), CQ_OK);
    assert_int_equal(n, 0);
    const char *some[] = {"规定"};
    assert_int_equal(cq_bm25_top(s, kb, some, 1, 1, 0, 0, h, &n, NULL, &err), CQ_OK);
    assert_int_equal(n, 0);
    /* the statistics kept from a search that found rows, then terms that no row holds (counted, none kept yet) */
    assert_int_equal(cq_bm25_top(s, kb, some, 1, 1, 0, 4, h, &n, NULL, &err), CQ_OK);
    assert_int_equal(n, 4);
    const char *nowhere[] = {"没有", "也无"};
    assert_int_equal(cq_bm25_top(s, kb, nowhere, 2, 1, 0, 4, h, &n, NULL, &err), CQ_OK);
    assert_int_equal(n, 0);
    assert_int_equal(cq_bm25_top(s, kb, nowhere, 2, 1, 5, 4, h, &n, NULL, &err), CQ_OK); /* kept now */
    assert_int_equal(n, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_same_as_reference, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_nothing, test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
