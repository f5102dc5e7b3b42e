/* The trained decoder's prompts, cq-prompt-v1 (docs/ANSWERS.md), pinned byte for byte: Chinese and English, the
 * answer and relevance tasks, a label the text already starts with (not repeated), newlines and \r in a text and
 * around the question, the 800-character budget of an answer prompt (the first passage cut inside a multi-byte
 * character run, later ones whole or not at all, at most five) and the 400-character cut of a relevance prompt.
 * The training tools' Python formatter is held to the same bytes through `clauseqa prompt --jsonl`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "app/generate_answer.h"
#include "core/strbuf.h"

/* s repeated n times (malloc'd) */
static char *rep(const char *s, int n) {
    cq_strbuf b = {0};
    for (int i = 0; i < n; i++) cq_strbuf_puts(&b, s);
    return cq_strbuf_take(&b);
}

static void test_answer_zh(void **state) {
    (void)state;
    const cq_prompt_passage p[] = {
        {"中华人民共和国劳动合同法", "第十九条",
         "第十九条 劳动合同期限三个月以上不满一年的，试用期不得超过一个月；\n劳动合同期限一年以上不满三年的，试用期不得超过二个月。"},
        {"中华人民共和国劳动法", "第二十一条", "试用期最长不得超过六个月。"},
        {NULL, NULL, "没有标题也没有条号。"},
    };
    size_t *shown;
    char *got = cq_prompt_answer(" 试用期最长多长时间？\r\n", p, 3, &shown);
    assert_string_equal(got, "任务：回答\n材料：\n"
                             "[1] 《中华人民共和国劳动合同法》第十九条 劳动合同期限三个月以上不满一年的，试用期不得超过一个月； "
                             "劳动合同期限一年以上不满三年的，试用期不得超过二个月。\n"
                             "[2] 《中华人民共和国劳动法》第二十一条 试用期最长不得超过六个月。\n"
                             "[3] 《》没有标题也没有条号。\n"
                             "问题：试用期最长多长时间？\n答案：");
    assert_int_equal(shown[0], strlen(p[0].text));
    assert_int_equal(shown[1], strlen(p[1].text));
    assert_int_equal(shown[2], strlen(p[2].text));
    free(got), free(shown);
}

static void test_answer_en(void **state) {
    (void)state;
    const cq_prompt_passage p[] = {
        {"Distribution Agreement", "12.1", "Either party may terminate\r\nthis Agreement on thirty (30) days notice."},
        {"Distribution Agreement", "Section 13", "Section 13 Survival. Sections 9 and 10 survive termination."},
        {"Distribution Agreement", NULL, "This Agreement is governed by the laws of Delaware."},
    };
    char *got = cq_prompt_answer("\tWhat does this agreement say\nabout termination?  ", p, 3, NULL);
    assert_string_equal(got, "Task: answer\nPassages:\n"
                             "[1] Distribution Agreement, 12.1. Either party may terminate  this Agreement on thirty (30) "
                             "days notice.\n"
                             "[2] Distribution Agreement. Section 13 Survival. Sections 9 and 10 survive termination.\n"
                             "[3] Distribution Agreement. This Agreement is governed by the laws of Delaware.\n"
                             "Question: What does this agreement say about termination?\nAnswer:");
    free(got);
}

/* The 800-character budget, counted in characters (here 3-byte ones), headers not counted. */
static void test_answer_budget(void **state) {
    (void)state;
    size_t *shown;
    /* the first passage cut to 800 characters (790 + 10 of 12), and then nothing fits */
    char *long1 = rep("条", 790), *tail = rep("款", 12);
    char *t1 = malloc(strlen(long1) + strlen(tail) + 1);
    strcpy(t1, long1), strcat(t1, tail);
    cq_prompt_passage p[6] = {{"法", NULL, t1}, {"法", NULL, "短。"}};
    char *got = cq_prompt_answer("问？", p, 2, &shown);
    char *cut = rep("款", 10);
    cq_strbuf want = {0};
    cq_strbuf_printf(&want, "任务：回答\n材料：\n[1] 《法》%s%s\n问题：问？\n答案：", long1, cut);
    assert_string_equal(got, want.data);
    assert_int_equal(shown[0], 800 * 3);
    assert_int_equal(shown[1], 0);
    free(got), free(shown), cq_strbuf_free(&want);

    /* 300 + 500 fill it exactly; a third passage of one character no longer fits */
    char *a = rep("甲", 300), *b = rep("乙", 500);
    p[0] = (cq_prompt_passage){"法", "第一条", a}, p[1] = (cq_prompt_passage){"法", "第二条", b};
    p[2] = (cq_prompt_passage){"法", "第三条", "丙"};
    got = cq_prompt_answer("问？", p, 3, &shown);
    want = (cq_strbuf){0};
    cq_strbuf_printf(&want, "任务：回答\n材料：\n[1] 《法》第一条 %s\n[2] 《法》第二条 %s\n问题：问？\n答案：", a, b);
    assert_string_equal(got, want.data);
    assert_int_equal(shown[2], 0);
    free(got), free(shown), cq_strbuf_free(&want);

    /* the first one that does not fit ends the list, even when a later one would */
    char *c = rep("丁", 700), *d = rep("戊", 200);
    p[0] = (cq_prompt_passage){"法", NULL, c}, p[1] = (cq_prompt_passage){"法", NULL, d};
    p[2] = (cq_prompt_passage){"法", NULL, "己。"};
    got = cq_prompt_answer("问？", p, 3, &shown);
    want = (cq_strbuf){0};
    cq_strbuf_printf(&want, "任务：回答\n材料：\n[1] 《法》%s\n问题：问？\n答案：", c);
    assert_string_equal(got, want.data);
    assert_int_equal(shown[1], 0);
    assert_int_equal(shown[2], 0);
    free(got), free(shown), cq_strbuf_free(&want);

    /* five passages at most */
    for (int i = 0; i < 6; i++) p[i] = (cq_prompt_passage){"T", NULL, "x."};
    got = cq_prompt_answer("q?", p, 6, &shown);
    assert_string_equal(got, "Task: answer\nPassages:\n[1] T. x.\n[2] T. x.\n[3] T. x.\n[4] T. x.\n[5] T. x.\n"
                             "Question: q?\nAnswer:");
    assert_int_equal(shown[4], 2);
    assert_int_equal(shown[5], 0);
    free(got), free(shown);
    free(long1), free(tail), free(t1), free(cut), free(a), free(b), free(c), free(d);
}

static void test_relevance(void **state) {
    (void)state;
    /* Chinese: the label at the text's start is not repeated; the text cut to 400 characters (4 + 396) */
    char *body = rep("权", 420), *text = malloc(strlen(body) + 32);
    sprintf(text, "第三条 %s", body);
    const cq_prompt_passage zh = {"中华人民共和国民法典", "第三条", text};
    char *got = cq_prompt_relevance("民事主体的权利受法律保护吗？", &zh);
    char *kept = rep("权", 396);
    cq_strbuf want = {0};
    cq_strbuf_printf(&want, "任务：相关性\n材料：《中华人民共和国民法典》第三条 %s\n问题：民事主体的权利受法律保护吗？\n相关：", kept);
    assert_string_equal(got, want.data);
    free(got), cq_strbuf_free(&want);

    /* English: a label the text does not start with, newlines flattened */
    const cq_prompt_passage en = {"Supply Agreement", "7.2", "Payment.\nThe Customer shall pay\r\nwithin 30 days."};
    got = cq_prompt_relevance("When must the customer pay?\n", &en);
    assert_string_equal(got, "Task: relevance\nPassage: Supply Agreement, 7.2. Payment. The Customer shall pay  within "
                             "30 days.\nQuestion: When must the customer pay?\nRelevant:");
    free(got);
    free(body), free(text), free(kept);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answer_zh),
        cmocka_unit_test(test_answer_en),
        cmocka_unit_test(test_answer_budget),
        cmocka_unit_test(test_relevance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
