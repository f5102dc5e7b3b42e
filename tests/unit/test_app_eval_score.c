/* The scoring rules of shared/eval/FORMAT.md. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "app/eval_score.h"

static void test_char_f1(void **state) {
    (void)state;
    assert_float_equal(cq_eval_char_f1("800元", "800元"), 1.0, 1e-9);
    assert_float_equal(cq_eval_char_f1("生活费800元", "800元"), 2 * (4.0 / 7) * 1.0 / (4.0 / 7 + 1.0), 1e-9);
    assert_float_equal(cq_eval_char_f1("abc", "xyz"), 0.0, 1e-9);
    assert_float_equal(cq_eval_char_f1("", "x"), 0.0, 1e-9);
    /* Multisets, not sets: "aa" vs "a" has 1 common character. */
    assert_float_equal(cq_eval_char_f1("aa", "a"), 2 * 0.5 * 1.0 / 1.5, 1e-9);
    /* NFKC, case and white space do not count. */
    assert_float_equal(cq_eval_char_f1("Ａ B", "ab"), 1.0, 1e-9);
}

static void test_exact(void **state) {
    (void)state;
    assert_true(cq_eval_exact(" YES ", "yes"));
    assert_true(cq_eval_exact("光荣和ω-force", "光荣和Ω-Force"));
    assert_false(cq_eval_exact("800", "800元"));
}

static void test_hit(void **state) {
    (void)state;
    cq_eval_passage r = {"公司法", "第十二条 公司的经营范围由公司章程规定。", 3, 4};
    cq_eval_gold g = {"公司法", 0, "公司的经营范围由公司章程规定。"};
    assert_true(cq_eval_is_hit(&r, &g)); /* passage contains gold */
    g.doc = "合伙企业法";
    assert_false(cq_eval_is_hit(&r, &g)); /* other document */
    cq_eval_gold whole = {"公司法", 0, NULL};
    assert_true(cq_eval_is_hit(&r, &whole)); /* whole doc counts */
    cq_eval_gold page4 = {"公司法", 4, NULL}, page5 = {"公司法", 5, NULL};
    assert_true(cq_eval_is_hit(&r, &page4)); /* spans pages 3-4 */
    assert_false(cq_eval_is_hit(&r, &page5));
    /* Gold contains a passage of >= 20 characters. */
    cq_eval_passage part = {"d", "abcdefghijklmnopqrstuvwxyz", 0, 0};
    cq_eval_gold longer = {"d", 0, "0123 abcdefghijklmnopqrstuvwxyz 456"};
    assert_true(cq_eval_is_hit(&part, &longer));
    cq_eval_passage tiny = {"d", "xyz", 0, 0};
    cq_eval_gold big = {"d", 0, "0123456789 xyz 0123456789"};
    assert_false(cq_eval_is_hit(&tiny, &big));
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_char_f1), cmocka_unit_test(test_exact),
                                       cmocka_unit_test(test_hit)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
