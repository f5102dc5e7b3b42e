/* index/fusion_score.c: the score fusion on lists worked by hand, against the rankings tools/ssm_train/fusion.py's
 * ranked_score() made (tests/data/fusion/score_rankings.jsonl, written by tests/unit/fusion_score_vs_py.py, which
 * also runs this program on fresh cases: CLAUSEQA_FUSION_SCORE_CASES names its file), and its "fusion" config. */
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

static size_t rank(cq_fusion_norm norm, double w, int m, double c, const int64_t *b, const double *bs, size_t nb,
                   const int64_t *d, const double *ds, size_t nd, cq_fused *out) {
    size_t n = 0;
    cq_err err = {0};
    assert_int_equal(cq_fusion_rank_scores(norm, (cq_fusion_params){w, m, c}, b, bs, nb, d, ds, nd, out, &n, &err),
                     CQ_OK);
    for (size_t i = 1; i < n; i++) assert_true(out[i].score <= out[i - 1].score);
    return n;
}

static void expect(cq_fusion_norm norm, double w, int m, double c, const int64_t *b, const double *bs, size_t nb,
                   const int64_t *d, const double *ds, size_t nd, const int64_t *want, size_t n_want) {
    cq_fused out[128];
    size_t n = rank(norm, w, m, c, b, bs, nb, d, ds, nd, out);
    assert_int_equal(n, n_want);
    for (size_t i = 0; i < n; i++)
        if (out[i].id != want[i])
            fail_msg("w %g m %d c %g, place %zu: clause %lld, expected %lld", w, m, c, i, (long long)out[i].id,
                     (long long)want[i]);
}

static void test_fixed_lists(void **state) {
    (void)state;
    /* min-max: BM25 1 → 1, 2 and 3 → 0.8125, 4 → 0.25, 5 → 0; dense 6 → 1, 3 → 0.833, 1 and 7 → 0.667, 8 → 0; a
     * clause absent from a list takes that list's lowest (0). w 0.5: 1 0.833, 3 0.823, 6 0.5, 2 0.406, 7 0.333, 4
     * 0.125, then 5 and 8 at 0 in the order met. */
    const int64_t b[] = {1, 2, 3, 4, 5}, d[] = {6, 3, 1, 7, 8};
    const double bs[] = {9, 7.5, 7.5, 3, 1}, ds[] = {0.8, 0.7, 0.6, 0.6, 0.2};
    const int64_t half[] = {1, 3, 6, 2, 7, 4, 5, 8};
    expect(CQ_FUSION_NORM_MINMAX, 0.5, 0, 0, b, bs, 5, d, ds, 5, half, N_OF(half));
    /* m 2, always: 1 and 2 stay first; not confident ((9 - 7.5) / 9 < 0.5): as m 0 */
    const int64_t kept[] = {1, 2, 3, 6, 7, 4, 5, 8};
    expect(CQ_FUSION_NORM_MINMAX, 0.5, 2, 0, b, bs, 5, d, ds, 5, kept, N_OF(kept));
    expect(CQ_FUSION_NORM_MINMAX, 0.5, 2, 0.16, b, bs, 5, d, ds, 5, kept, N_OF(kept));
    expect(CQ_FUSION_NORM_MINMAX, 0.5, 2, 0.5, b, bs, 5, d, ds, 5, half, N_OF(half));
    /* w 0: BM25's order, then the dense-only clauses in dense order; w 1: dense's order, then the BM25-only ones */
    const int64_t w0[] = {1, 2, 3, 4, 5, 6, 7, 8}, w1[] = {6, 3, 1, 7, 2, 4, 5, 8};
    expect(CQ_FUSION_NORM_MINMAX, 0, 0, 0, b, bs, 5, d, ds, 5, w0, N_OF(w0));
    expect(CQ_FUSION_NORM_MINMAX, 1, 0, 0, b, bs, 5, d, ds, 5, w1, N_OF(w1));
    expect(CQ_FUSION_NORM_Z, 0, 0, 0, b, bs, 5, d, ds, 5, w0, N_OF(w0));
    expect(CQ_FUSION_NORM_Z, 1, 0, 0, b, bs, 5, d, ds, 5, w1, N_OF(w1));

    cq_fused out[16];
    assert_int_equal(rank(CQ_FUSION_NORM_MINMAX, 0.5, 2, 0, b, bs, 5, d, ds, 5, out), 8);
    assert_false(out[0].from_dense); /* kept */
    assert_true(out[1].score > out[2].score);
    assert_true(out[2].from_dense);  /* 3: dense rank 2 before BM25 rank 3 */
    assert_true(out[2].score == 0.5 * 0.8125 + 0.5 * ((0.7 - 0.2) / (0.8 - 0.2)));
    assert_true(out[3].from_dense);  /* 6: dense only */

    /* the named documents' clauses come first with lower scores: BM25's order is kept (made non-increasing, the
     * list is constant: every clause 1 at w 0) */
    const int64_t nb3[] = {1, 2, 3}, nd3[] = {4};
    const double nbs3[] = {3, 5, 4}, nds3[] = {0.9};
    const int64_t named[] = {1, 2, 3, 4};
    expect(CQ_FUSION_NORM_MINMAX, 0, 0, 0, nb3, nbs3, 3, nd3, nds3, 1, named, N_OF(named));
    /* z of a constant list is 0 everywhere; a dense list of one is constant too: ties in the order met */
    const int64_t zb[] = {5, 6}, zd[] = {6, 7};
    const double zbs[] = {2, 2}, zds[] = {0.5, 0.5};
    const int64_t zwant[] = {5, 6, 7};
    expect(CQ_FUSION_NORM_Z, 0.5, 0, 0, zb, zbs, 2, zd, zds, 2, zwant, N_OF(zwant));
    /* empty lists */
    expect(CQ_FUSION_NORM_MINMAX, 0.5, 3, 0, NULL, NULL, 0, d, ds, 5, (const int64_t[]){6, 3, 1, 7, 8}, 5);
    expect(CQ_FUSION_NORM_Z, 0.5, 3, 0, b, bs, 5, NULL, NULL, 0, w0, 5);
    assert_int_equal(rank(CQ_FUSION_NORM_Z, 0.5, 3, 0, NULL, NULL, 0, NULL, NULL, 0, out), 0);
    /* a clause twice in a list: kept once, scored by its first place */
    const int64_t tb[] = {1, 2, 1}, td[] = {3, 3, 2};
    const double tbs[] = {2, 1, 0.5}, tds[] = {0.9, 0.8, 0.1};
    assert_int_equal(rank(CQ_FUSION_NORM_MINMAX, 0.5, 3, 0, tb, tbs, 3, td, tds, 3, out), 3);
    assert_int_equal(out[0].id, 1);
    assert_int_equal(out[1].id, 2);
    assert_int_equal(out[2].id, 3);
}

/* JSON lines {"norm", "w", "m", "c", "bm25": [[id, score]], "dense": [[id, score]], "ranked": [ids]}. */
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
        const cJSON *norm = cJSON_GetObjectItem(c, "norm"), *w = cJSON_GetObjectItem(c, "w"),
                    *m = cJSON_GetObjectItem(c, "m"), *cc = cJSON_GetObjectItem(c, "c");
        assert_true(cJSON_IsString(norm) && cJSON_IsNumber(w) && cJSON_IsNumber(m) && cJSON_IsNumber(cc));
        const cJSON *lists[2] = {cJSON_GetObjectItem(c, "bm25"), cJSON_GetObjectItem(c, "dense")};
        int64_t ids[2][128];
        double sc[2][128];
        size_t n[2] = {0};
        for (int l = 0; l < 2; l++) {
            const cJSON *x;
            assert_true(cJSON_IsArray(lists[l]));
            cJSON_ArrayForEach(x, lists[l]) {
                assert_true(n[l] < 128 && cJSON_GetArraySize(x) == 2);
                ids[l][n[l]] = (int64_t)cJSON_GetArrayItem(x, 0)->valuedouble;
                sc[l][n[l]++] = cJSON_GetArrayItem(x, 1)->valuedouble;
            }
        }
        int64_t want[256];
        size_t n_want = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, cJSON_GetObjectItem(c, "ranked")) want[n_want++] = (int64_t)x->valuedouble;
        cq_fused out[256];
        size_t got = rank(strcmp(norm->valuestring, "z") ? CQ_FUSION_NORM_MINMAX : CQ_FUSION_NORM_Z, w->valuedouble,
                          m->valueint, cc->valuedouble, ids[0], sc[0], n[0], ids[1], sc[1], n[1], out);
        int same = got == n_want;
        for (size_t i = 0; same && i < got; i++) same = out[i].id == want[i];
        if (!same) {
            size_t i = 0;
            while (i < got && i < n_want && out[i].id == want[i]) i++;
            fail_msg("%s:%zu (%s, w %g, m %d, c %g): fusion.py ranks %zu clauses, this %zu; first difference at place "
                     "%zu", path, line_no, norm->valuestring, w->valuedouble, m->valueint, cc->valuedouble, n_want,
                     got, i);
        }
        cJSON_Delete(c);
        n_cases++;
    }
    free(text);
    printf("%zu cases of %s ranked as fusion.py ranks them\n", n_cases, path);
    assert_true(n_cases >= min_cases);
}

static void test_as_fusion_py(void **state) {
    (void)state;
    const char *live = getenv("CLAUSEQA_FUSION_SCORE_CASES");
    if (live && *live) {
        check_cases(live, 1);
        return;
    }
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/fusion/score_rankings.jsonl", src ? src : ".");
    check_cases(path, 500);
}

static void expect_bad(const char *json, const char *says) {
    cq_fusion f;
    cq_err err = {0};
    assert_int_equal(cq_fusion_from_config(json, strlen(json), &f, &err), CQ_ERR_FORMAT);
    if (!strstr(err.msg, says)) fail_msg("%s: the message \"%s\" does not say \"%s\"", json, err.msg, says);
    assert_int_equal(f.method, CQ_FUSION_RRF);
}

static void test_config(void **state) {
    (void)state;
    cq_fusion f;
    cq_err err = {0};
    const char *ok = "{\"fusion\": {\"method\": \"score\", \"norm\": \"z\", \"fitted_on\": \"teacher\", \"zh\": {\"w\": "
                     "0.5, \"m\": 3, \"c\": 0.05}, \"en\": {\"w\": 0.4, \"m\": 0}}}";
    assert_int_equal(cq_fusion_from_config(ok, strlen(ok), &f, &err), CQ_OK);
    assert_int_equal(f.method, CQ_FUSION_SCORE);
    assert_int_equal(f.norm, CQ_FUSION_NORM_Z);
    assert_true(f.zh.w == 0.5 && f.zh.m == 3 && f.zh.c == 0.05);
    assert_true(f.en.w == 0.4 && f.en.m == 0 && f.en.c == 0.0); /* c left out: 0 */
    assert_string_equal(f.fitted_on, "teacher");
    assert_string_equal(cq_fusion_norm_name(f.norm), "z");
    const char *mm = "{\"fusion\": {\"method\": \"score\", \"norm\": \"minmax\", \"zh\": {\"w\": 0, \"m\": 0}, \"en\": "
                     "{\"w\": 1, \"m\": 1, \"c\": 2}}}";
    assert_int_equal(cq_fusion_from_config(mm, strlen(mm), &f, &err), CQ_OK);
    assert_int_equal(f.norm, CQ_FUSION_NORM_MINMAX);

    expect_bad("{\"fusion\": {\"method\": \"score\", \"zh\": {\"w\": 0.5, \"m\": 0}, \"en\": {\"w\": 0.5, \"m\": 0}}}",
               "norm must be \"minmax\" or \"z\"");
    expect_bad("{\"fusion\": {\"method\": \"score\", \"norm\": \"l2\", \"zh\": {\"w\": 0.5, \"m\": 0}, \"en\": {\"w\": "
               "0.5, \"m\": 0}}}", "norm must be");
    expect_bad("{\"fusion\": {\"method\": \"score\", \"norm\": \"z\", \"en\": {\"w\": 0.5, \"m\": 0}}}",
               "score needs \"zh\"");
    expect_bad("{\"fusion\": {\"method\": \"score\", \"norm\": \"z\", \"zh\": {\"w\": 1.5, \"m\": 0}, \"en\": {\"w\": "
               "0.5, \"m\": 0}}}", "\"fusion\".zh.w (the dense scores' weight) must be a number in 0..1");
    expect_bad("{\"fusion\": {\"method\": \"score\", \"norm\": \"z\", \"zh\": {\"w\": 0.5, \"m\": 0}, \"en\": {\"w\": "
               "0.5, \"m\": 0.5}}}", "en.m");
    expect_bad("{\"fusion\": {\"method\": \"score\", \"norm\": \"z\", \"zh\": {\"w\": 0.5, \"m\": 1, \"c\": -1}, \"en\": "
               "{\"w\": 0.5, \"m\": 0}}}", "\"fusion\".zh.c (BM25's confidence margin) must be a finite number");
    expect_bad("{\"fusion\": {\"method\": \"score\", \"norm\": \"z\", \"zh\": {\"w\": 0.5, \"m\": 1, \"c\": \"x\"}, "
               "\"en\": {\"w\": 0.5, \"m\": 0}}}", "zh.c");
    expect_bad("{\"fusion\": {\"method\": \"gate\"}}", "must be \"keep\", \"score\" or \"rrf\"");

    cq_fusion_method m;
    assert_int_equal(cq_fusion_parse_method("score", &m, &err), CQ_OK);
    assert_int_equal(m, CQ_FUSION_SCORE);
    assert_string_equal(cq_fusion_method_name(CQ_FUSION_SCORE), "score");
    assert_int_equal(cq_fusion_parse_method("scores", &m, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "weights, rrf, keep or score"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_lists),
        cmocka_unit_test(test_as_fusion_py),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
