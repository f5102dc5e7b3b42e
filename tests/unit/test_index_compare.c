/* index/compare: the character diff (Myers, semantic clean-up, descriptions) and the clause alignment of two
 * versions — renumbered, inserted, deleted, split, merged, moved and rewritten clauses — and the comparison of two
 * stored documents. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/strbuf.h"
#include "search/compare.h"
#include "test_store_util.h"

/* ---- diff --------------------------------------------------------------------------------------------------- */

/* The diff as one string: unchanged text as is, [-deleted-], {+inserted+}. */
static char *diff_string(const char *a, const char *b) {
    cq_diff d;
    cq_err err = {0};
    assert_int_equal(cq_diff_texts(a, b, &d, &err), CQ_OK);
    cq_strbuf s = {0};
    for (size_t i = 0; i < d.n; i++) {
        const char *open = d.spans[i].op == CQ_DIFF_DELETE ? "[-" : d.spans[i].op == CQ_DIFF_INSERT ? "{+" : "";
        const char *close = d.spans[i].op == CQ_DIFF_DELETE ? "-]" : d.spans[i].op == CQ_DIFF_INSERT ? "+}" : "";
        cq_strbuf_printf(&s, "%s%s%s", open, d.spans[i].text, close);
    }
    /* the spans rebuild both texts */
    cq_strbuf ra = {0}, rb = {0};
    for (size_t i = 0; i < d.n; i++) {
        if (d.spans[i].op != CQ_DIFF_INSERT) cq_strbuf_puts(&ra, d.spans[i].text);
        if (d.spans[i].op != CQ_DIFF_DELETE) cq_strbuf_puts(&rb, d.spans[i].text);
    }
    assert_string_equal(ra.data ? ra.data : "", a);
    assert_string_equal(rb.data ? rb.data : "", b);
    cq_strbuf_free(&ra);
    cq_strbuf_free(&rb);
    cq_diff_free(&d);
    return cq_strbuf_take(&s);
}

static void diff_is(const char *a, const char *b, const char *want) {
    char *got = diff_string(a, b);
    if (strcmp(got, want)) fail_msg("diff of '%s' → '%s':\n  got  %s\n  want %s", a, b, got, want);
    free(got);
}

static void test_diff(void **state) {
    (void)state;
    diff_is("", "", "");
    diff_is("相同的文字", "相同的文字", "相同的文字");
    diff_is("", "新增", "{+新增+}");
    diff_is("删去", "", "[-删去-]");
    diff_is("股东作出决定时，应当采用书面形式。", "股东作出决定时，应当采用书面形式，并由股东签名。",
            "股东作出决定时，应当采用书面形式{+，并由股东签名+}。");
    diff_is("一人有限责任公司不设股东会。", "只有一个股东的有限责任公司不设股东会。",
            "[-一人-]{+只有一个股东的+}有限责任公司不设股东会。");
    /* an unchanged character between two changes reads as part of one rewrite */
    diff_is("甲乙丙丁戊", "子乙丑丁寅", "[-甲乙丙丁戊-]{+子乙丑丁寅+}");
    /* Latin words are whole tokens */
    diff_is("The Seller shall deliver the goods.", "The Supplier shall deliver the goods.",
            "The [-Seller-]{+Supplier+} shall deliver the goods.");
    diff_is("within 30 days", "within 45 days", "within [-30-]{+45+} days");
    /* a long rewrite still rebuilds both texts */
    char a[4000] = "", b[4000] = "";
    for (int i = 0; i < 300; i++) {
        strcat(a, i % 3 ? "甲" : "乙");
        strcat(b, i % 5 ? "甲" : "丙");
    }
    free(diff_string(a, b));
}

static void test_describe(void **state) {
    (void)state;
    cq_diff d;
    cq_err err = {0};
    assert_int_equal(cq_diff_texts("一人有限责任公司不设股东会。", "只有一个股东的有限责任公司不设股东会，并置备于公司。", &d, &err),
                     CQ_OK);
    char *s = cq_diff_describe(&d, true, 40);
    assert_string_equal(s, "将“一人”改为“只有一个股东的”；增加“，并置备于公司”");
    free(s);
    s = cq_diff_describe(&d, false, 3);
    assert_non_null(strstr(s, "replaced \"一人\" with \"只有一…\""));
    free(s);
    cq_diff_free(&d);
    assert_int_equal(cq_diff_texts("同", "同", &d, &err), CQ_OK);
    s = cq_diff_describe(&d, true, 40);
    assert_string_equal(s, "文字未变");
    free(s);
    cq_diff_free(&d);
}

/* ---- alignment ---------------------------------------------------------------------------------------------- */

typedef struct {
    const char *label, *key, *text;
} art;

/* Aligns two lists of articles and renders the pairs as "kind a→b" lines, e.g. "same 第一条→第二条". */
static char *align_string(const art *a, size_t na, const art *b, size_t nb, cq_alignment *keep) {
    cq_cmp_clause *ca = calloc(na + 1, sizeof *ca), *cb = calloc(nb + 1, sizeof *cb);
    for (size_t i = 0; i < na; i++) ca[i] = (cq_cmp_clause){(int64_t)i + 1, a[i].label, a[i].key, "", a[i].text, 1};
    for (size_t i = 0; i < nb; i++) cb[i] = (cq_cmp_clause){(int64_t)i + 101, b[i].label, b[i].key, "", b[i].text, 1};
    cq_alignment al;
    cq_err err = {0};
    assert_int_equal(cq_align_clauses(ca, na, cb, nb, &al, &err), CQ_OK);
    cq_strbuf s = {0};
    for (size_t k = 0; k < al.n_pairs; k++) {
        const cq_cmp_pair *p = &al.pairs[k];
        cq_strbuf_printf(&s, "%s%s ", k ? "; " : "", cq_pair_kind_name(p->kind));
        for (size_t x = 0; x < p->n_a; x++) cq_strbuf_printf(&s, "%s%s", x ? "+" : "", a[p->a[x]].key);
        cq_strbuf_puts(&s, "→");
        for (size_t x = 0; x < p->n_b; x++) cq_strbuf_printf(&s, "%s%s", x ? "+" : "", b[p->b[x]].key);
        if (p->moved) cq_strbuf_puts(&s, " moved");
    }
    if (keep) *keep = al;
    else cq_alignment_free(&al);
    free(ca);
    free(cb);
    return cq_strbuf_take(&s);
}

static void align_is(const art *a, size_t na, const art *b, size_t nb, const char *want) {
    char *got = align_string(a, na, b, nb, NULL);
    if (strcmp(got, want)) fail_msg("alignment:\n  got  %s\n  want %s", got, want);
    free(got);
}

#define N(x) (sizeof x / sizeof x[0])

static const art old_law[] = {
    {"第一条", "1", "第一条 为了规范公司的组织和行为，保护公司、股东和债权人的合法权益，制定本法。"},
    {"第二条", "2", "第二条 本法所称公司是指依照本法在中国境内设立的有限责任公司和股份有限公司。"},
    {"第三条", "3", "第三条 公司是企业法人，有独立的法人财产，享有法人财产权。"},
    {"第四条", "4", "第四条 公司股东依法享有资产收益、参与重大决策和选择管理者等权利。"},
    {"第五条", "5", "第五条 公司从事经营活动，应当遵守法律、行政法规，遵守社会公德、商业道德。"},
};

static void test_align_same_and_renumbered(void **state) {
    (void)state;
    align_is(old_law, 5, old_law, 5, "same 1→1; same 2→2; same 3→3; same 4→4; same 5→5");
    /* a clause inserted at the front renumbers every other one */
    const art b[] = {
        {"第一条", "1", "第一条 为了规范公司的组织和行为，保护公司、股东和债权人的合法权益，制定本法。"},
        {"第二条", "2", "第二条 国家鼓励公司参与社会公益活动，公布社会责任报告。"},
        {"第三条", "3", "第三条 本法所称公司是指依照本法在中国境内设立的有限责任公司和股份有限公司。"},
        {"第四条", "4", "第四条 公司是企业法人，有独立的法人财产，享有法人财产权。"},
        {"第五条", "5", "第五条 公司股东依法享有资产收益、参与重大决策和选择管理者等权利。"},
        {"第六条", "6", "第六条 公司从事经营活动，应当遵守法律法规，遵守社会公德、商业道德，诚实守信。"},
    };
    cq_alignment al;
    char *got = align_string(old_law, 5, b, N(b), &al);
    assert_string_equal(got, "same 1→1; added →2; same 2→3; same 3→4; same 4→5; changed 5→6");
    free(got);
    assert_int_equal(al.n_same, 4);
    assert_int_equal(al.n_added, 1);
    assert_int_equal(al.n_changed, 1);
    /* renumbered only: the three same pairs; the renumbered pair that also changed is counted as changed */
    assert_int_equal(al.n_renumbered, 3);
    assert_int_equal(al.n_renumbered_changed, 1);
    assert_true(al.pairs[2].renumbered);
    assert_false(al.pairs[0].renumbered);
    /* the changed pair's diff, labels left out */
    const cq_cmp_pair *p = &al.pairs[5];
    assert_int_equal(p->kind, CQ_PAIR_CHANGED);
    assert_true(p->similarity > 0.5 && p->similarity < 1);
    assert_int_equal(p->diff.spans[0].op, CQ_DIFF_EQUAL);
    assert_string_equal(p->diff.spans[0].text, "公司从事经营活动，应当遵守法律");
    cq_alignment_free(&al);
}

static void test_align_deleted_and_rewritten(void **state) {
    (void)state;
    /* 第三条 deleted; 第五条 rewritten in place (little in common: the gap pass pairs it) */
    const art b[] = {
        {"第一条", "1", "第一条 为了规范公司的组织和行为，保护公司、股东和债权人的合法权益，制定本法。"},
        {"第二条", "2", "第二条 本法所称公司是指依照本法在中国境内设立的有限责任公司和股份有限公司。"},
        {"第三条", "3", "第三条 公司股东依法享有资产收益、参与重大决策和选择管理者等权利。"},
        {"第四条", "4", "第四条 公司从事经营活动，应当充分考虑职工、消费者等利益相关者的利益。"},
    };
    align_is(old_law, 5, b, N(b), "same 1→1; same 2→2; removed 3→; same 4→3; changed 5→4");
    /* the last clause removed, a new one added at the end */
    const art c[] = {
        {"第一条", "1", "第一条 为了规范公司的组织和行为，保护公司、股东和债权人的合法权益，制定本法。"},
        {"第二条", "2", "第二条 本法所称公司是指依照本法在中国境内设立的有限责任公司和股份有限公司。"},
        {"第三条", "3", "第三条 公司是企业法人，有独立的法人财产，享有法人财产权。"},
        {"第四条", "4", "第四条 公司股东依法享有资产收益、参与重大决策和选择管理者等权利。"},
        {"第五条", "5", "第五条 本法自二〇二四年七月一日起施行。"},
    };
    align_is(old_law, 5, c, N(c), "same 1→1; same 2→2; same 3→3; same 4→4; removed 5→; added →5");
}

static void test_align_split_merge_moved(void **state) {
    (void)state;
    const art a[] = {
        {"第一条", "1", "第一条 为了规范公司的组织和行为，制定本法。"},
        {"第二条", "2", "第二条 有限责任公司设股东会，股东会由全体股东组成。股东会是公司的权力机构，依照本法行使职权。"},
        {"第三条", "3", "第三条 公司应当依法纳税，接受政府和社会公众的监督。"},
        {"第四条", "4", "第四条 公司的合并、分立、解散和清算，依照本法的规定办理。"},
    };
    /* 第二条 split into two; 第四条 moved before 第三条's place */
    const art b[] = {
        {"第一条", "1", "第一条 为了规范公司的组织和行为，制定本法。"},
        {"第二条", "2", "第二条 公司的合并、分立、解散和清算，依照本法的规定办理。"},
        {"第三条", "3", "第三条 有限责任公司设股东会，股东会由全体股东组成。"},
        {"第四条", "4", "第四条 股东会是公司的权力机构，依照本法行使职权。"},
        {"第五条", "5", "第五条 公司应当依法纳税，接受政府和社会公众的监督。"},
    };
    align_is(a, N(a), b, N(b), "same 1→1; same 4→2 moved; changed 2→3+4; same 3→5");
    /* and merged back */
    align_is(b, N(b), a, N(a), "same 1→1; changed 3+4→2; same 5→3; same 2→4 moved");
}

static void test_align_edges(void **state) {
    (void)state;
    align_is(old_law, 5, NULL, 0, "removed 1→; removed 2→; removed 3→; removed 4→; removed 5→");
    align_is(NULL, 0, old_law, 2, "added →1; added →2");
    align_is(NULL, 0, NULL, 0, "");
    /* repeated boilerplate: equal numbers break the tie */
    const art a[] = {{"第一条", "1", "第一条 （删除）"}, {"第二条", "2", "第二条 （删除）"}};
    align_is(a, 2, a, 2, "same 1→1; same 2→2");
    /* spaces and line breaks do not make a clause changed */
    const art x[] = {{"第一条", "1", "第一条 公司是企业法人。\n公司以其全部财产对公司的债务承担责任。"}};
    const art y[] = {{"第一条", "1", "第一条  公司是企业法人。 公司以其全部财产对公司的债务承担责任。"}};
    align_is(x, 1, y, 1, "same 1→1");
    assert_true(cq_text_similarity("公司是企业法人", "公司是企业法人。") > 0.99);
    assert_true(cq_text_similarity("公司是企业法人", "国家鼓励发展") < 0.1);
    assert_true(cq_text_similarity("", "") == 0);
}

static void test_clause_key(void **state) {
    (void)state;
    char k[32];
    cq_compare_clause_key("60", k, sizeof k);
    assert_string_equal(k, "60");
    cq_compare_clause_key("第六十条", k, sizeof k);
    assert_string_equal(k, "60");
    cq_compare_clause_key("六十", k, sizeof k);
    assert_string_equal(k, "60");
    cq_compare_clause_key("第二十条之一", k, sizeof k);
    assert_string_equal(k, "20-1");
    cq_compare_clause_key("7.2", k, sizeof k);
    assert_string_equal(k, "7.2");
    cq_compare_clause_key("20-1", k, sizeof k);
    assert_string_equal(k, "20-1");
}

/* ---- two stored documents ------------------------------------------------------------------------------------ */

static void test_compare_docs(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    int64_t kb;
    assert_int_equal(cq_store_kb_create(s, "laws", &kb, &err), CQ_OK);
    const char *const ca[][4] = {
        {NULL, NULL, "", "中华人民共和国某法 2018年10月26日修正"},
        {"第一条", "1", "第一条", "第一条 为了规范公司的组织和行为，制定本法。"},
        {"第二条", "2", "第二条", "第二条 一人有限责任公司章程由股东制定。"},
    };
    const char *const cb[][4] = {
        {NULL, NULL, "", "中华人民共和国某法 2023年12月29日修订"},
        {"第一条", "1", "第一条", "第一条 为了规范公司的组织和行为，保护职工的合法权益，制定本法。"},
        {"第二条", "2", "第二条", "第二条 公司应当依法登记。"},
    };
    int64_t a = test_add_doc(s, kb, "某法(2018-10-26)", "某法", "h1", ca, 3);
    int64_t b = test_add_doc(s, kb, "某法(2023-12-29)", "某法", "h2", cb, 3);
    cq_comparison c;
    assert_int_equal(cq_compare_docs(s, a, b, &c, &err), CQ_OK);
    /* test_add_doc makes label-less clauses paragraphs (kind 3) and the others articles: articles only */
    assert_int_equal(c.n_a, 2);
    assert_int_equal(c.n_b, 2);
    assert_int_equal(c.al.n_changed, 1);
    assert_int_equal(c.al.n_added + c.al.n_removed, 2);
    const cq_cmp_pair *p = cq_comparison_pair_of(&c, c.b[0].clause_id);
    assert_non_null(p);
    assert_int_equal(p->kind, CQ_PAIR_CHANGED);
    assert_true(cq_cmp_pair_holds(&c, p, "1", 0));
    assert_false(cq_cmp_pair_holds(&c, p, "2", 0));
    assert_null(cq_comparison_pair_of(&c, 99999));
    cq_comparison_free(&c);
    assert_int_equal(cq_compare_docs(s, a, a, &c, &err), CQ_OK);
    assert_int_equal(c.al.n_same, 2);
    cq_comparison_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff),
        cmocka_unit_test(test_describe),
        cmocka_unit_test(test_align_same_and_renumbered),
        cmocka_unit_test(test_align_deleted_and_rewritten),
        cmocka_unit_test(test_align_split_merge_moved),
        cmocka_unit_test(test_align_edges),
        cmocka_unit_test(test_clause_key),
        cmocka_unit_test_setup_teardown(test_compare_docs, test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
