/* app/answer_span.c: spans keep their qualifiers, on a generated set of negated and limited clauses (every word of
 * the lists, in templates, every span that starts inside or right after the qualifier, or ends inside or right
 * before a limit word); spans with nothing to keep are left alone; items (项) of clauses; the sentence around a
 * span. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "app/answer_span.h"

/* The starts of the characters of s in [a, b], b included when it is a boundary. */
static size_t boundaries(const char *s, size_t a, size_t b, size_t *out, size_t max) {
    size_t n = 0;
    for (size_t i = a; i <= b && n < max; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) out[n++] = i;
    return n;
}

/* Every span [s, e) with s in starts and e in ends (e > s) keeps [keep_start, keep_end): asserts, returns the count. */
static size_t check_spans(const char *text, const size_t *starts, size_t n_starts, const size_t *ends, size_t n_ends,
                          size_t keep_start, size_t keep_end) {
    size_t checked = 0, n = strlen(text);
    for (size_t i = 0; i < n_starts; i++)
        for (size_t j = 0; j < n_ends; j++) {
            if (ends[j] <= starts[i]) continue;
            size_t s = starts[i], e = ends[j];
            cq_span_keep_qualifiers(text, n, &s, &e);
            if (s > keep_start || e < keep_end || s > starts[i] || e < ends[j]) {
                fprintf(stderr, "lost a qualifier: \"%s\" span [%zu,%zu) -> [%zu,%zu) must hold [%zu,%zu)\n", text,
                        starts[i], ends[j], s, e, keep_start, keep_end);
                fail();
            }
            checked++;
        }
    return checked;
}

static const char *const ZH_SUBJECTS[] = {"用人单位", "劳动者", "当事人一方", "承租人"};
static const char *const ZH_OBJECTS[] = {"低于工资的百分之一百五十的工资报酬", "超过六个月", "安排劳动者延长工作时间",
                                         "订立书面劳动合同", "解除合同"};

/* 用人单位{Q}{object}。 for every Chinese "before" word Q: a span that starts inside Q or right after it takes Q in. */
static void test_generated_zh_before(void **state) {
    (void)state;
    size_t nw, cases = 0;
    const char *const *words = cq_span_qualifier_words(CQ_QUALIFIER_ZH_BEFORE, &nw);
    assert_true(nw >= 20);
    char text[512];
    for (size_t w = 0; w < nw; w++)
        for (size_t s = 0; s < sizeof ZH_SUBJECTS / sizeof *ZH_SUBJECTS; s++)
            for (size_t o = 0; o < sizeof ZH_OBJECTS / sizeof *ZH_OBJECTS; o++) {
                snprintf(text, sizeof text, "%s%s%s。", ZH_SUBJECTS[s], words[w], ZH_OBJECTS[o]);
                size_t q0 = strlen(ZH_SUBJECTS[s]), q1 = q0 + strlen(words[w]), o1 = q1 + strlen(ZH_OBJECTS[o]);
                size_t starts[16], ends[64];
                size_t ns = boundaries(text, q0 + 1, q1, starts, 16); /* inside Q, or right after it */
                size_t ne = boundaries(text, q1 + 1, o1, ends, 64);   /* anywhere in the object */
                cases += check_spans(text, starts, ns, ends, ne, q0, 0);
            }
    fprintf(stderr, "zh before: %zu spans of %zu words checked\n", cases, nw);
    assert_true(cases > 5000);
}

/* 劳动者{number}{Q}的，… for every Chinese "after" word Q: a span that ends inside Q or right before it takes Q in. */
static void test_generated_zh_after(void **state) {
    (void)state;
    static const char *const numbers[] = {"年满十六周岁", "连续工作十年", "百分之五十", "二百万元"};
    size_t nw, cases = 0;
    const char *const *words = cq_span_qualifier_words(CQ_QUALIFIER_ZH_AFTER, &nw);
    char text[512];
    for (size_t w = 0; w < nw; w++)
        for (size_t k = 0; k < sizeof numbers / sizeof *numbers; k++) {
            snprintf(text, sizeof text, "劳动者%s%s，用人单位应当支付经济补偿。", numbers[k], words[w]);
            size_t n0 = strlen("劳动者"), q0 = n0 + strlen(numbers[k]), q1 = q0 + strlen(words[w]);
            size_t starts[32], ends[16];
            size_t ns = boundaries(text, 0, q0 - 1, starts, 32); /* from the start up to the number's last char */
            size_t ne = boundaries(text, q0, q1 - 1, ends, 16);  /* right before Q or inside it */
            cases += check_spans(text, starts, ns, ends, ne, SIZE_MAX, q1);
        }
    fprintf(stderr, "zh after: %zu spans checked\n", cases);
    assert_true(cases > 300);
}

/* 除{exception}外，{subject}不得{object}。: a span of the rest takes the exception in; a span that opens 除… without
 * its 外 goes to the 外. */
static void test_generated_chu_wai(void **state) {
    (void)state;
    static const char *const exceptions[] = {"本法另有规定", "法律、行政法规另有规定", "当事人另有约定"};
    size_t cases = 0;
    char text[512];
    for (size_t x = 0; x < 3; x++)
        for (size_t s = 0; s < sizeof ZH_SUBJECTS / sizeof *ZH_SUBJECTS; s++) {
            snprintf(text, sizeof text, "除%s外，%s不得%s。", exceptions[x], ZH_SUBJECTS[s], ZH_OBJECTS[0]);
            size_t n = strlen(text);
            const char *subj = strstr(text, ZH_SUBJECTS[s]);
            size_t s0 = (size_t)(subj - text), e0 = n - strlen("。");
            size_t a = s0, b = e0;
            cq_span_keep_qualifiers(text, n, &a, &b);
            assert_int_equal(a, 0);
            assert_int_equal(b, e0);
            /* "除本法另有规定" alone: to its 外 */
            a = 0;
            b = strlen("除") + strlen(exceptions[x]);
            cq_span_keep_qualifiers(text, n, &a, &b);
            assert_int_equal(b, strlen("除") + strlen(exceptions[x]) + strlen("外"));
            cases += 2;
        }
    /* 解除 is no 除…外 */
    const char *t = "用人单位解除劳动合同外，还应当支付赔偿金。";
    size_t a = strlen("用人单位解除"), b = strlen("用人单位解除劳动合同");
    cq_span_keep_qualifiers(t, strlen(t), &a, &b);
    assert_int_equal(a, strlen("用人单位解除"));
    assert_true(cases == 24);
}

static const char *const EN_SUBJECTS[] = {"The Customer shall", "Either party may", "Licensee will"};
static const char *const EN_OBJECTS[] = {"assign this Agreement", "more than 30 days after notice",
                                         "disclose Confidential Information"};

/* "{subject} {Q} {object}." for every English "before" phrase Q: a span that starts at any word of Q after its
 * first, right after Q, or inside a word of Q, takes all of Q in. */
static void test_generated_en_before(void **state) {
    (void)state;
    size_t nw, cases = 0;
    const char *const *words = cq_span_qualifier_words(CQ_QUALIFIER_EN_BEFORE, &nw);
    assert_true(nw >= 15);
    char text[512];
    for (size_t w = 0; w < nw; w++)
        for (size_t s = 0; s < sizeof EN_SUBJECTS / sizeof *EN_SUBJECTS; s++)
            for (size_t o = 0; o < sizeof EN_OBJECTS / sizeof *EN_OBJECTS; o++) {
                snprintf(text, sizeof text, "%s %s %s.", EN_SUBJECTS[s], words[w], EN_OBJECTS[o]);
                size_t q0 = strlen(EN_SUBJECTS[s]) + 1, q1 = q0 + strlen(words[w]), o1 = q1 + 1 + strlen(EN_OBJECTS[o]);
                size_t starts[64], ends[64], ns = 0, ne = 0;
                for (size_t i = q0 + 1; i <= q1 + 1; i++) starts[ns++] = i; /* inside Q, after it */
                for (size_t i = q1 + 2; i <= o1; i++)
                    if (text[i] == ' ' || text[i] == '.') ends[ne++] = i; /* word ends of the object */
                cases += check_spans(text, starts, ns, ends, ne, q0, 0);
            }
    /* a contraction */
    const char *t = "The Customer won't assign this Agreement.";
    size_t a = strlen("The Customer won't "), b = strlen(t) - 1;
    cq_span_keep_qualifiers(t, strlen(t), &a, &b);
    assert_int_equal(a, strlen("The Customer "));
    fprintf(stderr, "en before: %zu spans of %zu phrases checked\n", cases, nw);
    assert_true(cases > 1000);
}

/* "… within {n} days {Q} after notice." for every English "after" phrase Q: a span ending at the number, inside Q or
 * right before it takes Q in. */
static void test_generated_en_after(void **state) {
    (void)state;
    size_t nw, cases = 0;
    const char *const *words = cq_span_qualifier_words(CQ_QUALIFIER_EN_AFTER, &nw);
    char text[512];
    for (size_t w = 0; w < nw; w++) {
        snprintf(text, sizeof text, "Payment is due 30 days %s after the invoice date.", words[w]);
        size_t q0 = strlen("Payment is due 30 days "), q1 = q0 + strlen(words[w]);
        size_t starts[2] = {strlen("Payment is "), strlen("Payment is due ")}, ends[64], ne = 0;
        ends[ne++] = q0 - 1; /* right before Q (the space) */
        for (size_t i = q0 + 1; i < q1; i++)
            if (text[i] == ' ' || text[i - 1] != ' ') ends[ne++] = i; /* inside Q */
        cases += check_spans(text, starts, 2, ends, ne, SIZE_MAX, q1);
    }
    fprintf(stderr, "en after: %zu spans checked\n", cases);
    assert_true(cases > 50);
}

/* Spans with no qualifier at their edges are left alone. */
static void test_unchanged(void **state) {
    (void)state;
    static const struct {
        const char *text, *span;
    } cases[] = {
        {"用人单位应当按照国家有关规定向劳动者支付加班费。", "向劳动者支付加班费"},
        {"劳动行政部门应当审查有无违法行为。", "违法行为"},     /* 有无 is "whether" */
        {"用人单位解除劳动合同的，应当支付经济补偿。", "劳动合同"}, /* 解除 */
        {"注册资本不得少于人民币二百万元；", "二百万元"},
        {"The notice shall be given in writing.", "be given in writing"},
        {"Section No. 5 applies to the Services.", "5 applies"},
        {"The Customer shall pay each invoice within thirty (30) days.", "within thirty (30) days"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bool changed = true;
        char *out = cq_span_extend_answer(cases[i].text, strlen(cases[i].text), cases[i].span, &changed);
        assert_non_null(out);
        if (changed) fprintf(stderr, "changed: \"%s\" -> \"%s\"\n", cases[i].span, out);
        assert_false(changed);
        assert_string_equal(out, cases[i].span);
        free(out);
    }
    assert_null(cq_span_extend_answer("abc", 3, "xyz", NULL));
    size_t s = 3, e = 2;
    assert_false(cq_span_keep_qualifiers("abcdef", 6, &s, &e)); /* an empty or reversed span is left alone */
}

/* The issue's case: the span after 不 gets it back; a dangling 不低于 goes on to its object. */
static void test_issue_cases(void **state) {
    (void)state;
    const char *t = "（二）休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬；";
    char *out = cq_span_extend_answer(t, strlen(t), "低于工资的百分之二百的工资报酬", NULL);
    assert_string_equal(out, "不低于工资的百分之二百的工资报酬");
    free(out);
    out = cq_span_extend_answer(t, strlen(t), "支付不低于", NULL);
    assert_string_equal(out, "支付不低于工资的百分之二百的工资报酬");
    free(out);
    out = cq_span_extend_answer(t, strlen(t), "能安排补休", NULL); /* cuts 不能 in half */
    assert_string_equal(out, "不能安排补休");
    free(out);
    const char *l = "每日工作时间不超过八小时、平均每周工作时间不超过四十四小时的工时制度。";
    out = cq_span_extend_answer(l, strlen(l), "超过八小时", NULL);
    assert_string_equal(out, "不超过八小时");
    free(out);
    /* never across a line break */
    const char *lines = "劳动者不得\n兼职。";
    size_t s = strlen("劳动者不得\n"), e = s + strlen("兼职");
    cq_span_keep_qualifiers(lines, strlen(lines), &s, &e);
    assert_int_equal(s, strlen("劳动者不得\n"));
}

static const char *article44 =
    "第四十四条 有下列情形之一的，用人单位应当按照下列标准支付高于劳动者正常工作时间工资的工资报酬：\n"
    "（一）安排劳动者延长工作时间的，支付不低于工资的百分之一百五十的工资报酬；\n"
    "（二）休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬；\n"
    "（三）法定休假日安排劳动者工作的，支付不低于工资的百分之三百的工资报酬。";

static void expect_items(const char *text, const char *const *firsts, size_t n) {
    cq_text_range it[CQ_SPAN_MAX_ITEMS];
    size_t got = cq_span_items(text, strlen(text), it, CQ_SPAN_MAX_ITEMS);
    if (got != n) fprintf(stderr, "items of \"%s\": %zu, expected %zu\n", text, got, n);
    assert_int_equal(got, n);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(firsts[i]);
        assert_true(it[i].end - it[i].start >= l);
        assert_memory_equal(text + it[i].start, firsts[i], l);
        if (i + 1 < n) assert_true(it[i].end <= it[i + 1].start);
    }
}

static void test_items(void **state) {
    (void)state;
    expect_items(article44, (const char *const[]){"（一）安排", "（二）休息日", "（三）法定"}, 3);
    cq_text_range it[8];
    assert_int_equal(cq_span_items(article44, strlen(article44), it, 8), 3);
    assert_memory_equal(article44 + it[1].end - strlen("工资报酬；"), "工资报酬；", strlen("工资报酬；"));
    assert_int_equal(article44[it[1].end], '\n'); /* an item ends at its line's end */
    assert_int_equal(it[2].end, strlen(article44));
    /* inline, after ：and ；, then a sentence that is no item */
    const char *inl = "应当具备下列条件：（一）注册资本不得少于人民币二百万元；（二）有固定的经营场所。经许可的，依法办理登记。";
    expect_items(inl, (const char *const[]){"（一）注册", "（二）有固定"}, 2);
    assert_int_equal(cq_span_items(inl, strlen(inl), it, 8), 2);
    assert_string_equal(inl + it[1].end, "经许可的，依法办理登记。");
    expect_items("Licensee shall:\n(a) pay the fees;\n(b) keep records;\n(c) allow audits.",
                 (const char *const[]){"(a) pay", "(b) keep", "(c) allow"}, 3);
    expect_items("The term is:\n(i) one year; or\n(ii) two years; or\n(iii) three years.",
                 (const char *const[]){"(i) one", "(ii) two", "(iii) three"}, 3);
    expect_items("Steps:\n1. Notify the Company.\n2. Return all materials.",
                 (const char *const[]){"1. Notify", "2. Return"}, 2);
    expect_items("一、总则\n二、适用范围\n三、附则", (const char *const[]){"一、总则", "二、适用", "三、附则"}, 3);
    /* no items: one marker, decimals, markers out of order, markers in the middle of a sentence */
    expect_items("（一）只有一项。", NULL, 0);
    expect_items("See Section 7.2 and 8.1 of the Agreement.", NULL, 0);
    expect_items("条件：（二）甲；（三）乙。", NULL, 0);
    expect_items("依照第（一）项和第（二）项的规定处理。", NULL, 0);
    /* a second list of the same kind ends the first */
    expect_items("甲：\n（一）子；\n（二）丑。\n乙：\n（一）寅；", (const char *const[]){"（一）子", "（二）丑"}, 2);
}

static void test_sentence(void **state) {
    (void)state;
    const char *s = "第三十一条 用人单位应当严格执行劳动定额标准。用人单位安排加班的，应当按照国家有关规定向劳动者支付加班费。";
    const char *span = strstr(s, "支付加班费");
    cq_text_range r = cq_span_sentence(s, strlen(s), (size_t)(span - s), (size_t)(span - s) + strlen("支付加班费"), 0,
                                       NULL, NULL);
    assert_true(r.end == strlen(s));
    assert_memory_equal(s + r.start, "用人单位安排加班的", strlen("用人单位安排加班的"));
    /* an item is its own sentence (；), its line ends it */
    const char *it = strstr(article44, "不低于工资的百分之二百");
    r = cq_span_sentence(article44, strlen(article44), (size_t)(it - article44), (size_t)(it - article44) + 6, 0, NULL,
                         NULL);
    char *sent = strndup(article44 + r.start, r.end - r.start);
    assert_string_equal(sent, "（二）休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬；");
    free(sent);
    /* English: '.' before a space ends a sentence; a long one is cut around the span */
    const char *en = "Term. The Customer shall pay each invoice within thirty days of its date by bank transfer. Other.";
    const char *p = strstr(en, "thirty days");
    bool cb, ca;
    r = cq_span_sentence(en, strlen(en), (size_t)(p - en), (size_t)(p - en) + 11, 0, &cb, &ca);
    sent = strndup(en + r.start, r.end - r.start);
    assert_string_equal(sent, "The Customer shall pay each invoice within thirty days of its date by bank transfer.");
    free(sent);
    assert_false(cb || ca);
    r = cq_span_sentence(en, strlen(en), (size_t)(p - en), (size_t)(p - en) + 11, 21, &cb, &ca);
    sent = strndup(en + r.start, r.end - r.start);
    assert_string_equal(sent, "thin thirty days of i");
    free(sent);
    assert_true(cb && ca);
}

/* cq_span_forbids: a question asking leave for an act the clause forbids outright. Every forbidding word of the
 * list in the same clause templates (the labour-law cases of the demo KB); then what must not count as forbidding. */
static bool forbids(const char *question, const char *clause, char *sentence, size_t cap) {
    cq_text_range r = {0, 0};
    const bool f = cq_span_forbids(question, clause, strlen(clause), &r);
    if (sentence) snprintf(sentence, cap, "%.*s", (int)(r.end - r.start), clause + r.start);
    return f;
}

/* A "X是否Y" question the clause answers with Y negated (cq_span_denies). */
static void expect_denies(const char *question, const char *text, const char *sentence) {
    cq_text_range r = {0, 0};
    const bool denies = cq_span_denies(question, text, strlen(text), &r);
    if (!sentence && denies) fail_msg("'%s' taken as denied by '%.*s'", question, (int)(r.end - r.start), text + r.start);
    if (sentence && !denies) fail_msg("'%s' not denied by '%s'", question, text);
    if (sentence && (r.end - r.start != strlen(sentence) || memcmp(text + r.start, sentence, r.end - r.start)))
        fail_msg("'%s': sentence '%.*s', expected '%s'", question, (int)(r.end - r.start), text + r.start, sentence);
}

static void test_denies(void **state) {
    (void)state;
    expect_denies("被告是否按照协议支付抚养费？", "经审理查明，被告未按照协议支付抚养费。原告诉至本院。",
                  "经审理查明，被告未按照协议支付抚养费");
    expect_denies("王x2与王x5是否办理了结婚登记？", "1.被告王x2与王x5(已死亡)未办理结婚登记,于2013年11月份开始同居生活",
                  "1.被告王x2与王x5(已死亡)未办理结婚登记,于2013年11月份开始同居生活");
    /* the question's 已经 is left out before the predicate is looked for */
    expect_denies("挪用的资金是否已经退还？", "案发后被告人认罪。\n上述资金至案发至今未退还给某某公司；", "上述资金至案发至今未退还给某某公司");
    expect_denies("双方是否签订了书面合同？", "双方一直没有签订书面合同，口头约定租金。", "双方一直没有签订书面合同，口头约定租金");
    /* a word between the denial and the predicate (未能按时还款), not more than two */
    expect_denies("被告是否按时还款？", "被告未能按时还款。", "被告未能按时还款");
    /* the sentence is about someone else: no pair of the question's subject before the predicate */
    expect_denies("原告是否有民事行为能力？", "被继承人之子张亚系无民事行为能力人。", NULL);
    /* affirmed, not denied */
    expect_denies("双方是否签订了租赁合同？", "双方签订了租赁合同，约定租期一年。", NULL);
    expect_denies("原告是否再婚？", "原告于2015年再婚。", NULL);
    /* a negation far before the predicate is not its own */
    expect_denies("被告是否支付货款？", "被告没有在约定期限内支付货款。", NULL);
    /* less than half the predicate's pairs in the sentence */
    expect_denies("原告是否按照操作规程对首件孔的尺寸进行检验？", "原告未按照规定操作。", NULL);
    /* a negative question, and one without 是否 */
    expect_denies("被告是否不同意离婚？", "被告不同意离婚。", NULL);
    expect_denies("被告支付了抚养费吗？", "被告未支付抚养费。", NULL);
    expect_denies(NULL, "被告未支付抚养费。", NULL);
}

static void test_forbids(void **state) {
    (void)state;
    static const char *const words[] = {"不得", "禁止", "严禁", "不准", "不允许", "不可以", "不可", "不能", "无权",
                                        "不应当", "不应"};
    static const char *const asks[] = {"用人单位可以扣押劳动者的身份证吗？", "用人单位能否扣押劳动者的身份证？",
                                       "用人单位是否可以扣押劳动者的身份证", "用人单位有权扣押劳动者的身份证吗",
                                       "用人单位可不可以扣押劳动者的身份证？"};
    char clause[512], sentence[512];
    for (size_t w = 0; w < sizeof words / sizeof *words; w++)
        for (size_t a = 0; a < sizeof asks / sizeof *asks; a++) {
            snprintf(clause, sizeof clause, "第九条 用人单位招用劳动者，%s扣押劳动者的居民身份证和其他证件。另有规定。",
                     words[w]);
            if (!forbids(asks[a], clause, sentence, sizeof sentence)) fail_msg("%s | %s: not forbidden", asks[a], clause);
            char want[256];
            snprintf(want, sizeof want, "第九条 用人单位招用劳动者，%s扣押劳动者的居民身份证和其他证件。", words[w]);
            assert_string_equal(sentence, want);
        }
    /* the subject named after the word, the label before it; everyone (任何单位) */
    assert_true(forbids("用人单位是否可以招用未满十六周岁的未成年人？", "第十五条 禁止用人单位招用未满十六周岁的未成年人。",
                        sentence, sizeof sentence));
    assert_string_equal(sentence, "第十五条 禁止用人单位招用未满十六周岁的未成年人。");
    assert_true(forbids("他人是否可以翻唱该歌曲？", "未经许可，任何单位和个人不得翻唱该歌曲。", NULL, 0));
    /* the question's subject in its condition; a sentence forbidding others */
    assert_false(forbids("妻子未经丈夫同意，能否自行终止妊娠？", "药品批发企业不得将终止妊娠药品销售给个人。", NULL, 0));
    assert_false(forbids("能否终止妊娠？", "药品批发企业不得终止妊娠。", NULL, 0));
    assert_true(forbids("能否终止妊娠？", "任何人不得终止妊娠。", NULL, 0));
    /* someone named between the word and a verb more than six characters after it (禁止药品零售企业销售终止妊娠药品) */
    assert_false(forbids("妻子未经丈夫同意，能否自行终止妊娠？", "第十四条 禁止药品零售企业销售终止妊娠药品。", NULL, 0));
    /* an adverb of the question's own before the verb; the verb after 违反…规定 */
    assert_true(forbids("用人单位可以随意延长劳动者的工作时间吗？", "第四十三条 用人单位不得违反本法规定延长劳动者的工作时间。",
                        NULL, 0));
    /* the second forbidding word of a sentence */
    assert_true(forbids("用人单位可以要求劳动者提供担保吗？",
                        "用人单位招用劳动者，不得扣押劳动者的居民身份证，不得要求劳动者提供担保或者以其他名义向劳动者收取财物。",
                        NULL, 0));

    /* not forbidden: another verb (强迫 is forbidden, 安排 is not) */
    assert_false(forbids("用人单位可以安排劳动者加班吗？", "用人单位不得强迫或者变相强迫劳动者加班。", NULL, 0));
    /* someone else is forbidden */
    assert_false(forbids("劳动者可以解除劳动合同吗？", "用人单位不得解除劳动合同。", NULL, 0));
    /* only under a condition */
    assert_false(forbids("用人单位可以解除劳动合同吗？",
                         "劳动者有下列情形之一的，用人单位不得依照本法第四十条的规定解除劳动合同。", NULL, 0));
    /* 不得不: must; 不能 … 的: a condition (unable to), not a forbidding */
    assert_false(forbids("用人单位可以解除劳动合同吗？", "用人单位不得不解除劳动合同。", NULL, 0));
    assert_false(forbids("劳动者可以胜任工作吗？", "劳动者不能胜任工作的，可以解除。", NULL, 0));
    assert_true(forbids("松香类物质是否可以用于食品加工？", "鉴定意见：受鉴的物品的主要成分为松香类物质，不能用于食品加工。",
                        NULL, 0));
    /* the act must be in the forbidding word's own phrase */
    assert_false(forbids("用人单位可以扣押劳动者的身份证吗？", "用人单位不得拖欠工资，扣押劳动者的身份证的，依法处罚。",
                         NULL, 0));
    /* no leave asked, or a negative question; ownership (所有权) is no leave */
    assert_false(forbids("用人单位扣押劳动者的身份证吗？", "用人单位不得扣押劳动者的身份证。", NULL, 0));
    assert_false(forbids("用人单位可以不扣押劳动者的身份证吗？", "用人单位不得扣押劳动者的身份证。", NULL, 0));
    assert_false(forbids("是否不得扣押劳动者的身份证？", "用人单位不得扣押劳动者的身份证。", NULL, 0));
    assert_false(forbids("房屋所有权证是否为伪造？", "任何人不得伪造房屋所有权证。", NULL, 0));
    /* the act only qualifies a noun there (不得撤销的…合同, 不能作为遗嘱的见证人, 应当享有的…经营权) */
    assert_false(forbids("婚内赠与协议可以撤销赠与吗？",
                         "经过公证的赠与合同或者依法不得撤销的具有救灾、扶贫等公益性质的赠与合同，不适用前款规定。", NULL, 0));
    assert_false(forbids("临终遗言能否作为遗嘱？", "继承人的债权人，也不能作为遗嘱的见证人。", NULL, 0));
    assert_false(forbids("外嫁的妇女是否可以享有土地承包经营权？",
                         "任何组织和个人不得剥夺、侵害妇女应当享有的土地承包经营权。", NULL, 0));
    /* the verb far from the word (不能证明…使用过该注册商标), a negative act (注册后不使用) */
    assert_false(forbids("我可以注册商标后使用吗？", "权利人不能证明此前三年内实际使用过该注册商标。", NULL, 0));
    assert_false(forbids("我可以注册商标后不使用吗？", "不得注册商标后不使用。", NULL, 0));
    /* a sentence whose subject is someone else, before a comma (议定书…备案后，不得任意变更); 、 joins a subject */
    assert_false(forbids("我的笔名、艺名、网名可以任意变更吗？", "第十条 议定书报送国家体委备案后，不得任意变更。", NULL, 0));
    assert_true(forbids("笔名、网名可以任意变更吗？", "笔名、网名一经登记，不得任意变更。", NULL, 0));
    /* an exception in the sentence: outright unless the question puts a condition of its own */
    static const char EXC[] = "第四十二条 承包方不得单方解除土地经营权流转合同，但受让方有下列情形之一的除外：";
    assert_true(forbids("承包方可以单方解除土地经营权流转合同吗？", EXC, sentence, sizeof sentence));
    assert_string_equal(sentence, "第四十二条 承包方不得单方解除土地经营权流转合同，但受让方有下列情形之一的除外：");
    assert_false(forbids("受让方擅自改变土地用途，承包方可以单方解除土地经营权流转合同吗？", EXC, NULL, 0));
    assert_true(forbids("保管人可以改变保管场所吗？", "除紧急情况外，保管人不得擅自改变保管场所。", NULL, 0));
    assert_false(forbids("遇到紧急情况，保管人可以改变保管场所吗？", "除紧急情况外，保管人不得擅自改变保管场所。", NULL, 0));
    /* an act of a single pair says too little */
    assert_false(forbids("可以加班吗？", "不得加班。", NULL, 0));
    assert_false(forbids("", "用人单位不得扣押劳动者的身份证。", NULL, 0));
    assert_false(forbids("用人单位可以扣押劳动者的身份证吗？", "", NULL, 0));
}

/* A passive question about someone in a case a clause's items protect (cq_span_protects). */
static void test_protects(void **state) {
    (void)state;
    const char *a42 = "第四十二条 劳动者有下列情形之一的，用人单位不得依照本法第四十条、第四十一条的规定解除劳动合同：\n"
                      "（一）从事接触职业病危害作业的劳动者未进行离岗前职业健康检查的；\n"
                      "（二）患病或者非因工负伤，在规定的医疗期内的；\n"
                      "（三）女职工在孕期、产期、哺乳期的；\n"
                      "（四）法律、行政法规规定的其他情形。";
    const size_t n = strlen(a42);
    cq_text_range s = {0, 0};
    assert_true(cq_span_protects("女职工怀孕期间可以被辞退吗？", a42, n, &s)); /* 辞退 → 解除劳动合同 */
    char *said = strndup(a42 + s.start, s.end - s.start);
    assert_non_null(strstr(said, "劳动者有下列情形之一的，用人单位不得"));
    assert_non_null(strstr(said, "（三）女职工在孕期、产期、哺乳期的")); /* up to the item, not past it */
    assert_null(strstr(said, "（四）"));
    free(said);
    assert_true(cq_span_protects("劳动者患病医疗期内能被解雇吗？", a42, n, NULL));
    assert_true(cq_span_protects("在医疗期内患病的员工会被解除劳动合同吗", a42, n, NULL)); /* the act as the statute says */
    /* not passive, not leave, a case no item holds, an act the lead does not forbid, a negative question */
    assert_false(cq_span_protects("女职工怀孕期间可以辞职吗？", a42, n, NULL));
    assert_false(cq_span_protects("女职工怀孕期间辞退合法吗？", a42, n, NULL));
    assert_false(cq_span_protects("劳动者严重违纪可以被辞退吗？", a42, n, NULL));
    assert_false(cq_span_protects("女职工怀孕期间可以被调岗吗？", a42, n, NULL));
    assert_false(cq_span_protects("女职工怀孕期间可以被不辞退吗？", a42, n, NULL));
    /* a prohibition without items, or items without 下列情形之一 leading them */
    assert_false(cq_span_protects("女职工怀孕期间可以被辞退吗？", "第一条 用人单位不得解除劳动合同。", 37, NULL));
    const char *other = "第五条 用人单位可以解除劳动合同：（一）女职工在孕期的；（二）患病的。";
    assert_false(cq_span_protects("女职工怀孕期间可以被辞退吗？", other, strlen(other), NULL));
    assert_false(cq_span_protects("", a42, n, NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generated_zh_before), cmocka_unit_test(test_generated_zh_after),
        cmocka_unit_test(test_generated_chu_wai),   cmocka_unit_test(test_generated_en_before),
        cmocka_unit_test(test_generated_en_after),  cmocka_unit_test(test_unchanged),
        cmocka_unit_test(test_issue_cases),         cmocka_unit_test(test_items),
        cmocka_unit_test(test_sentence),            cmocka_unit_test(test_forbids), cmocka_unit_test(test_protects), cmocka_unit_test(test_denies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
