/* core/: numerals, UTF-8, normalization, SHA-256. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/numerals.h"
#include "core/sha256.h"
#include "core/strbuf.h"
#include "core/text_norm.h"
#include "core/utf8.h"

static void test_number_parse(void **state) {
    (void)state;
    static const struct {
        const char *in;
        long value;
        size_t used;
    } cases[] = {
        {"十二条", 12, 6},         {"三十三条", 33, 9},      {"一百零五条", 105, 12}, {"一百一十条", 110, 12},
        {"二百五十七", 257, 15},   {"十", 10, 3},            {"一千二百零三", 1203, 18}, {"两万", 20000, 6},
        {"12条", 12, 2},           {"１２条", 12, 6},        {"二〇二一年", 2021, 12}, {"壹佰贰拾", 120, 12},
        {"一万零一", 10001, 12},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t used;
        long v = cq_number_parse(cases[i].in, strlen(cases[i].in), &used);
        assert_int_equal(v, cases[i].value);
        assert_int_equal(used, cases[i].used);
    }
    size_t used;
    assert_int_equal(cq_number_parse("条", 3, &used), -1);
    assert_int_equal(used, 0);
    assert_int_equal(cq_number_parse("", 0, &used), -1);
    /* a reference's number: a run too large is still read whole, as CQ_NUMBER_TOO_LARGE */
    assert_int_equal(cq_number_parse_ref("12条", 5, &used), 12);
    assert_int_equal(used, 2);
    assert_int_equal(cq_number_parse_ref("99999999999条", 14, &used), CQ_NUMBER_TOO_LARGE);
    assert_int_equal(used, 11);
    const char *cn = "九九九九九九九九九九条"; /* ten 九: positional, too large */
    assert_int_equal(cq_number_parse_ref(cn, strlen(cn), &used), CQ_NUMBER_TOO_LARGE);
    assert_int_equal(used, 30);
    assert_int_equal(cq_number_parse_ref("１２３４５６７８９０条", 33, &used), CQ_NUMBER_TOO_LARGE);
    assert_int_equal(used, 30);
    assert_int_equal(cq_number_parse_ref("条", 3, &used), -1);
    assert_int_equal(used, 0);
}

static void test_number_format(void **state) {
    (void)state;
    char buf[64];
    static const struct {
        long v;
        const char *out;
    } cases[] = {{1, "一"}, {10, "十"}, {12, "十二"}, {20, "二十"}, {33, "三十三"}, {105, "一百零五"},
                 {110, "一百一十"}, {1000, "一千"}, {1203, "一千二百零三"}, {10001, "一万零一"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_string_equal(cq_number_format_cn(cases[i].v, buf), cases[i].out);
    /* Round trip over every label number a law can have. */
    for (long v = 1; v < 3000; v++) {
        cq_number_format_cn(v, buf);
        size_t used;
        assert_int_equal(cq_number_parse(buf, strlen(buf), &used), v);
        assert_int_equal(used, strlen(buf));
    }
}

static void test_utf8(void **state) {
    (void)state;
    size_t len;
    assert_int_equal(cq_utf8_decode("条", 3, &len), 0x6761);
    assert_int_equal(len, 3);
    assert_int_equal(cq_utf8_decode("\xe6\x9d", 2, &len), CQ_UTF8_REPLACEMENT); /* truncated */
    assert_int_equal(len, 1);
    assert_int_equal(cq_utf8_decode("\xc0\x80", 2, &len), CQ_UTF8_REPLACEMENT); /* overlong */
    assert_true(cq_utf8_valid("第十二条 ok", strlen("第十二条 ok")));
    assert_false(cq_utf8_valid("\xff", 1));
    assert_int_equal(cq_utf8_count("第十二条ab", strlen("第十二条ab")), 6);
    char out[4];
    assert_int_equal(cq_utf8_encode(0x20000, out), 4);
    assert_true(cq_is_cjk(0x6761));
    assert_false(cq_is_cjk(0x3002));
    assert_true(cq_is_cjk_punct(0x3002));
    assert_true(cq_is_space(0x3000));
}

/* Display width: the ingest progress line cuts file names by terminal columns, never inside a character. */
static void test_display_width(void **state) {
    (void)state;
    assert_int_equal(cq_utf8_char_width('a'), 1);
    assert_int_equal(cq_utf8_char_width(0x52b3), 2);  /* 劳 */
    assert_int_equal(cq_utf8_char_width(0xff08), 2);  /* （ full-width */
    assert_int_equal(cq_utf8_char_width(0x0301), 0);  /* combining acute */
    assert_int_equal(cq_utf8_char_width('\n'), 0);
    const char *name = "劳动合同法(2012).pdf"; /* 5 wide characters, then 10 narrow ones: 20 columns */
    int cols;
    assert_int_equal(cq_utf8_fit_width(name, strlen(name), 100, &cols), strlen(name));
    assert_int_equal(cols, 20);
    assert_int_equal(cq_utf8_fit_width(name, strlen(name), 5, &cols), 6); /* 劳动: 4 columns; 合 would be 6 */
    assert_int_equal(cols, 4);
    assert_int_equal(cq_utf8_fit_width(name, strlen(name), 1, &cols), 0);
    assert_int_equal(cols, 0);
    assert_int_equal(cq_utf8_fit_width(name, strlen(name), 12, &cols), 17); /* 劳动合同法 + "(2" */
    assert_int_equal(cols, 12);
    const char *e = "e\xcc\x81t"; /* e + combining acute + t: the mark stays with its letter */
    assert_int_equal(cq_utf8_fit_width(e, strlen(e), 1, &cols), 3);
    assert_int_equal(cols, 1);
}

static void test_repair(void **state) {
    (void)state;
    cq_strbuf b = {0};
    cq_text_stats st = {0};
    /* Kangxi radical ⽇ (U+2F47), radical supplement ⻓ (U+2ED3), compatibility 﨑 (U+FA11), full-width ＡＢ１２,
     * private use U+E000, a replacement char, an ideographic space: full-width punctuation stays. */
    const char *in = "⽇⻓\xef\xa4\x80ＡＢ１２\xee\x80\x80\xef\xbf\xbd　，。";
    cq_text_repair(in, strlen(in), &b, &st);
    assert_string_equal(b.data, "日长\xe8\xb1\x88" "AB12 ，。"); /* 豈 U+8C48 */
    assert_int_equal(st.radicals, 3);
    assert_int_equal(st.fullwidth, 4);
    assert_int_equal(st.private_use, 1);
    assert_int_equal(st.replacement, 1);
    cq_strbuf_free(&b);
}

static void test_fold_and_norm(void **state) {
    (void)state;
    char *f = cq_text_fold("ＡＢＣ Def，", strlen("ＡＢＣ Def，"));
    assert_string_equal(f, "abc def,");
    free(f);
    char *k = cq_text_norm_key("  第 十二 条\n Ｘ ", strlen("  第 十二 条\n Ｘ "));
    assert_string_equal(k, "第十二条x");
    free(k);
}

static void test_sha256(void **state) {
    (void)state;
    char hex[65];
    cq_sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    cq_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    cq_sha256_hex(m, strlen(m), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* Streaming in odd pieces equals one shot. */
    cq_sha256 c;
    uint8_t d[32];
    cq_sha256_init(&c);
    for (size_t i = 0; i < strlen(m); i += 7) cq_sha256_update(&c, m + i, strlen(m) - i < 7 ? strlen(m) - i : 7);
    cq_sha256_final(&c, d);
    assert_int_equal(d[0], 0x24);
    assert_int_equal(d[31], 0xc1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_number_parse), cmocka_unit_test(test_number_format), cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_display_width),
        cmocka_unit_test(test_repair),       cmocka_unit_test(test_fold_and_norm), cmocka_unit_test(test_sha256),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
