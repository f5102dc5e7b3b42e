/* index/fusion: the two fusions on fixed lists (worked by hand), reciprocal rank against a plain re-statement of
 * the fusion retrieve.c did before keep existed, keep against the rankings tools/ssm_train/fusion.py's ranked()
 * made (tests/data/fusion/keep_rankings.jsonl, written by tests/unit/fusion_vs_py.py, which also runs this program
 * on fresh cases when python3 is there: CLAUSEQA_FUSION_CASES names its file), and the "fusion" of ssm.json. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "search/fusion.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Ranks the lists and checks the order of ids (and that scores never rise down the list). */
static void expect_ranking(cq_fusion_method method, double w, int m, const int64_t *bm25, size_t nb,
                           const int64_t *dense, size_t nd, const int64_t *want, size_t n_want) {
    cq_fused out[128];
    size_t n = cq_fusion_rank(method, (cq_fusion_params){w, m, 0}, bm25, nb, dense, nd, out);
    assert_int_equal(n, n_want);
    for (size_t i = 0; i < n; i++) {
        if (out[i].id != want[i]) fail_msg("place %zu: clause %lld, expected %lld", i, (long long)out[i].id,
                                           (long long)want[i]);
        if (i) assert_true(out[i].score <= out[i - 1].score);
    }
}

static void test_keep_fixed_lists(void **state) {
    (void)state;
    /* w 0.1, m 2 (g192c's fit for Chinese): 11 and 12 stay; 13 = 1/63 + 0.1/62 (BM25 3, dense 2), 15 = 1/65 +
     * 0.1/65, 14 = 1/64, then the dense-only 20 (0.1/61) and 21 (0.1/64); 11 is not scored again from dense. */
    const int64_t b1[] = {11, 12, 13, 14, 15}, d1[] = {20, 13, 11, 21, 15};
    const int64_t w1[] = {11, 12, 13, 15, 14, 20, 21};
    expect_ranking(CQ_FUSION_KEEP, 0.1, 2, b1, N_OF(b1), d1, N_OF(d1), w1, N_OF(w1));
    cq_fused out[16];
    assert_int_equal(cq_fusion_rank(CQ_FUSION_KEEP, (cq_fusion_params){0.1, 2, 0}, b1, 5, d1, 5, out), 7);
    assert_false(out[0].from_dense);
    assert_false(out[1].from_dense);
    assert_true(out[2].from_dense);  /* 13: dense rank 2 before BM25 rank 3 */
    assert_false(out[3].from_dense); /* 15: rank 5 in both, BM25 wins the tie */
    assert_true(out[5].from_dense);
    assert_true(out[1].score > out[2].score); /* the kept ones score above every fused one */
    assert_true(out[2].score == 1.0 / 63 + 0.1 / 62);

    /* m 0, w 1: equal scores go to the clause met first (BM25's list, then dense), not to the smaller id ... */
    const int64_t b2[] = {9, 6}, d2[] = {3, 8};
    const int64_t keep2[] = {9, 3, 6, 8};
    expect_ranking(CQ_FUSION_KEEP, 1.0, 0, b2, 2, d2, 2, keep2, 4);
    /* ... where reciprocal rank puts the smaller id first, as retrieve.c always did */
    const int64_t rrf2[] = {3, 9, 6, 8};
    expect_ranking(CQ_FUSION_RRF, 0.25, 7, b2, 2, d2, 2, rrf2, 4); /* rrf ignores w and m */

    /* w 0: BM25's order; the dense-only clauses after it, in dense order (score 0) */
    const int64_t b3[] = {4, 2, 9}, d3[] = {7, 2, 5, 4};
    const int64_t w3[] = {4, 2, 9, 7, 5};
    expect_ranking(CQ_FUSION_KEEP, 0.0, 0, b3, 3, d3, 4, w3, 5);
    /* m beyond the BM25 list: the list as it is, then the dense-only clauses by rank */
    expect_ranking(CQ_FUSION_KEEP, 0.5, 10, b3, 3, d3, 4, w3, 5);
    expect_ranking(CQ_FUSION_KEEP, 3.0, 3, b3, 3, d3, 4, w3, 5);
    /* m 0 and a strong dense side: 7 = 3/61 leads, 2 = 1/62 + 3/62, 4 = 1/61 + 3/64, 5 = 3/63, 9 = 1/63 */
    const int64_t w4[] = {2, 4, 7, 5, 9};
    expect_ranking(CQ_FUSION_KEEP, 3.0, 0, b3, 3, d3, 4, w4, 5);

    /* an empty dense list: BM25's order whatever w and m */
    const int64_t b5[] = {3, 1, 2};
    expect_ranking(CQ_FUSION_KEEP, 0.1, 1, b5, 3, NULL, 0, b5, 3);
    expect_ranking(CQ_FUSION_KEEP, 2.0, 0, b5, 3, NULL, 0, b5, 3);
    /* an empty BM25 list: the dense order, w 0 included */
    const int64_t d6[] = {5, 6, 1};
    expect_ranking(CQ_FUSION_KEEP, 0.1, 2, NULL, 0, d6, 3, d6, 3);
    expect_ranking(CQ_FUSION_KEEP, 0.0, 0, NULL, 0, d6, 3, d6, 3);
    assert_int_equal(cq_fusion_rank(CQ_FUSION_KEEP, (cq_fusion_params){1, 1, 0}, NULL, 0, NULL, 0, out), 0);
    /* both lists the same clauses */
    const int64_t b7[] = {1, 2, 3}, d7[] = {3, 2, 1};
    const int64_t w7[] = {1, 3, 2}; /* m 1: 1 stays; 3 = 1/63 + 2/61, 2 = 1/62 + 2/62 */
    expect_ranking(CQ_FUSION_KEEP, 2.0, 1, b7, 3, d7, 3, w7, 3);
}

/* The reciprocal-rank fusion retrieve.c did before search/fusion.c, restated plainly: each list adds 1 / (60 + r),
 * best score first, equal scores by smaller id; a clause's list is where it ranks best (BM25 on equal ranks). */
typedef struct {
    int64_t id;
    double score;
    int best_rank;
    bool dense;
} plain_rrf;

static int cmp_plain(const void *a, const void *b) {
    const plain_rrf *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

static void plain_add(plain_rrf *f, size_t *n, int64_t id, int rank, bool dense) {
    size_t i = 0;
    while (i < *n && f[i].id != id) i++;
    if (i == *n) f[(*n)++] = (plain_rrf){id, 0, rank, dense};
    f[i].score += 1.0 / (60.0 + rank);
    if (rank < f[i].best_rank) {
        f[i].best_rank = rank;
        f[i].dense = dense;
    }
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static unsigned draw(unsigned n) { /* xorshift64*, in [0, n) */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (unsigned)(((rng * 2685821657736338717ull) >> 33) % n);
}

/* n distinct ids from [1, pool] */
static size_t draw_list(int64_t *ids, size_t n, unsigned pool) {
    size_t k = 0;
    while (k < n) {
        int64_t id = 1 + draw(pool);
        size_t j = 0;
        while (j < k && ids[j] != id) j++;
        if (j == k) ids[k++] = id;
    }
    return k;
}

static void test_rrf_unchanged(void **state) {
    (void)state;
    for (int round = 0; round < 2000; round++) {
        int64_t b[200], d[50];
        unsigned pool = 5 + draw(300);
        size_t nb = draw_list(b, draw(pool < 200 ? pool : 200), pool);
        size_t nd = draw_list(d, draw(pool < 50 ? pool : 50), pool);
        plain_rrf want[250];
        size_t nw = 0;
        for (size_t i = 0; i < nb; i++) plain_add(want, &nw, b[i], (int)i + 1, false);
        for (size_t i = 0; i < nd; i++) plain_add(want, &nw, d[i], (int)i + 1, true);
        qsort(want, nw, sizeof *want, cmp_plain);
        cq_fused got[250];
        size_t n = cq_fusion_rank(CQ_FUSION_RRF, (cq_fusion_params){draw(4) * 0.5, (int)draw(5), 0}, b, nb, d, nd, got);
        assert_int_equal(n, nw);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(got[i].id, want[i].id);
            assert_true(got[i].score == want[i].score); /* bit for bit */
            assert_int_equal(got[i].from_dense, want[i].dense);
        }
    }
}

/* JSON lines {"w", "m", "bm25": [ids], "dense": [ids], "ranked": [ids]}: keep must rank each case as "ranked". */
static void check_cases(const char *path, size_t min_cases) {
    char *text = NULL;
    size_t len = 0;
    cq_err err = {0};
    if (cq_file_read(path, 64u << 20, &text, &len, &err)) fail_msg("%s", err.msg);
    size_t n_cases = 0, line_no = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        line_no++;
        if (!*line) continue;
        cJSON *c = cJSON_Parse(line);
        if (!c) fail_msg("%s:%zu: not JSON", path, line_no);
        const cJSON *w = cJSON_GetObjectItem(c, "w"), *m = cJSON_GetObjectItem(c, "m");
        const cJSON *lists[3] = {cJSON_GetObjectItem(c, "bm25"), cJSON_GetObjectItem(c, "dense"),
                                 cJSON_GetObjectItem(c, "ranked")};
        int64_t ids[3][256];
        size_t n[3] = {0};
        assert_true(cJSON_IsNumber(w) && cJSON_IsNumber(m));
        for (int l = 0; l < 3; l++) {
            const cJSON *x;
            assert_true(cJSON_IsArray(lists[l]));
            cJSON_ArrayForEach(x, lists[l]) {
                assert_true(n[l] < 256);
                ids[l][n[l]++] = (int64_t)x->valuedouble;
            }
        }
        cq_fused out[512];
        size_t got = cq_fusion_rank(CQ_FUSION_KEEP, (cq_fusion_params){w->valuedouble, m->valueint, 0}, ids[0], n[0],
                                    ids[1], n[1], out);
        int same = got == n[2];
        for (size_t i = 0; same && i < got; i++) same = out[i].id == ids[2][i];
        if (!same) {
            size_t i = 0;
            while (i < got && i < n[2] && out[i].id == ids[2][i]) i++;
            fail_msg("%s:%zu (w %g, m %d): fusion.py ranks %zu clauses, this %zu; first difference at place %zu",
                     path, line_no, w->valuedouble, m->valueint, n[2], got, i);
        }
        cJSON_Delete(c);
        n_cases++;
    }
    free(text);
    printf("%zu cases of %s ranked as fusion.py ranks them\n", n_cases, path);
    assert_true(n_cases >= min_cases);
}

static void test_keep_as_fusion_py(void **state) {
    (void)state;
    const char *live = getenv("CLAUSEQA_FUSION_CASES"); /* fusion_vs_py.py's fresh cases */
    if (live && *live) {
        check_cases(live, 1);
        return;
    }
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/fusion/keep_rankings.jsonl", src ? src : ".");
    check_cases(path, 500);
}

/* ---- ssm.json's "fusion" ------------------------------------------------------------------------------------ */

static cq_status from_config(const char *json, cq_fusion *f, cq_err *err) {
    return cq_fusion_from_config(json, strlen(json), f, err);
}

static void expect_bad(const char *json, const char *says) {
    cq_fusion f;
    cq_err err = {0};
    assert_int_equal(from_config(json, &f, &err), CQ_ERR_FORMAT);
    if (!strstr(err.msg, says)) fail_msg("%s: the message \"%s\" does not say \"%s\"", json, err.msg, says);
    assert_int_equal(f.method, CQ_FUSION_RRF);
}

static void test_config(void **state) {
    (void)state;
    cq_fusion f;
    cq_err err = {0};
    /* none: reciprocal rank */
    assert_int_equal(from_config("{\"format\": \"clauseqa-ssm\", \"d_model\": 192}", &f, &err), CQ_OK);
    assert_int_equal(f.method, CQ_FUSION_RRF);
    assert_int_equal(from_config("{\"fusion\": {\"method\": \"rrf\"}}", &f, &err), CQ_OK);
    assert_int_equal(f.method, CQ_FUSION_RRF);
    /* the object ssm14c's training writes (other members ignored) */
    assert_int_equal(from_config("{\"d_model\": 192, \"fusion\": {\"method\": \"keep\", \"fitted_on\": \"calibration "
                                 "part, g192c\", \"zh\": {\"w\": 0.1, \"m\": 2, \"n_calib\": 831}, \"en\": {\"w\": 0, "
                                 "\"m\": 0}, \"all\": {\"w\": 0, \"m\": 0}}}",
                                 &f, &err),
                     CQ_OK);
    assert_int_equal(f.method, CQ_FUSION_KEEP);
    assert_true(f.zh.w == 0.1);
    assert_int_equal(f.zh.m, 2);
    assert_true(f.en.w == 0.0);
    assert_int_equal(f.en.m, 0);
    assert_string_equal(f.fitted_on, "calibration part, g192c");
    assert_true(cq_fusion_params_for(&f, true).w == 0.1);
    assert_int_equal(cq_fusion_params_for(&f, false).m, 0);
    assert_int_equal(from_config("{\"fusion\": {\"method\": \"keep\", \"zh\": {\"w\": 3, \"m\": 1000000}, \"en\": "
                                 "{\"w\": 1e3, \"m\": 3.0}}}", &f, &err), CQ_OK);
    assert_int_equal(f.zh.m, CQ_FUSION_MAX_KEEP);
    assert_int_equal(f.en.m, 3);
    assert_string_equal(f.fitted_on, "");

    expect_bad("{\"fusion\": \"keep\"}", "must be an object");
    expect_bad("{\"fusion\": {\"zh\": {\"w\": 1, \"m\": 0}}}", "method must be \"keep\", \"score\" or \"rrf\", not missing");
    expect_bad("{\"fusion\": {\"method\": \"gate\"}}", "not \"gate\"");
    expect_bad("{\"fusion\": {\"method\": 2}}", "not a non-string");
    expect_bad("{\"fusion\": {\"method\": \"keep\", \"en\": {\"w\": 0, \"m\": 0}}}", "keep needs \"zh\"");
    expect_bad("{\"fusion\": {\"method\": \"keep\", \"zh\": {\"w\": 0, \"m\": 0}}}", "keep needs \"en\"");
    expect_bad("{\"fusion\": {\"method\": \"keep\", \"zh\": {\"w\": -0.1, \"m\": 0}, \"en\": {\"w\": 0, \"m\": 0}}}",
               "\"fusion\".zh.w (the dense list's weight) must be a finite number");
    expect_bad("{\"fusion\": {\"method\": \"keep\", \"zh\": {\"w\": 1e999, \"m\": 0}, \"en\": {\"w\": 0, \"m\": 0}}}",
               "zh.w");
    expect_bad("{\"fusion\": {\"method\": \"keep\", \"zh\": {\"w\": \"0.1\", \"m\": 0}, \"en\": {\"w\": 0, \"m\": 0}}}",
               "zh.w");
    expect_bad("{\"fusion\": {\"method\": \"keep\", \"zh\": {\"m\": 0}, \"en\": {\"w\": 0, \"m\": 0}}}", "zh.w");
    expect_bad("{\"fusion\": {\"method\": \"keep\", \"zh\": {\"w\": 0, \"m\": 0}, \"en\": {\"w\": 0, \"m\": 1.5}}}",
               "\"fusion\".en.m (BM25's hits kept in place) must be a whole number in 0..1000000");
    expect_bad("{\"fusion\": {\"method\": \"keep\", \"zh\": {\"w\": 0, \"m\": -1}, \"en\": {\"w\": 0, \"m\": 0}}}",
               "zh.m");
    expect_bad("{\"fusion\": {\"method\": \"keep\", \"zh\": {\"w\": 0, \"m\": 1e7}, \"en\": {\"w\": 0, \"m\": 0}}}",
               "zh.m");
    expect_bad("{\"fusion\": {\"method\": \"keep\", \"fitted_on\": 3, \"zh\": {\"w\": 0, \"m\": 0}, \"en\": {\"w\": 0, "
               "\"m\": 0}}}", "fitted_on must be a string");
    /* Python's json.dump writes a NaN as NaN, which is not JSON */
    expect_bad("{\"fusion\": {\"method\": \"keep\", \"zh\": {\"w\": NaN, \"m\": 0}, \"en\": {\"w\": 0, \"m\": 0}}}",
               "not JSON");

    cq_fusion_method m;
    assert_int_equal(cq_fusion_parse_method("keep", &m, &err), CQ_OK);
    assert_int_equal(m, CQ_FUSION_KEEP);
    assert_int_equal(cq_fusion_parse_method("rrf", &m, &err), CQ_OK);
    assert_int_equal(m, CQ_FUSION_RRF);
    assert_int_equal(cq_fusion_parse_method("weights", &m, &err), CQ_OK);
    assert_int_equal(m, CQ_FUSION_WEIGHTS);
    assert_int_equal(cq_fusion_parse_method("hybrid", &m, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "weights, rrf, keep or score"));
    assert_string_equal(cq_fusion_method_name(CQ_FUSION_KEEP), "keep");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keep_fixed_lists),
        cmocka_unit_test(test_rrf_unchanged),
        cmocka_unit_test(test_keep_as_fusion_py),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
