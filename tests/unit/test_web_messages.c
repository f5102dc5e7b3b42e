/* web/messages: every server message has a code a page can translate; core/plain_reason: a failed document's reason
 * without MuPDF's internals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/plain_reason.h"
#include "web/messages.h"

/* message has code, and its values are args (NULL-terminated). */
static void expect_code(const char *message, const char *code, const char *const *args) {
    cJSON *a = cJSON_CreateArray();
    const char *got = cq_web_message_code(message, a);
    if (!code) {
        if (got) fail_msg("'%s' should have no code, got %s", message, got);
        assert_int_equal(cJSON_GetArraySize(a), 0);
        cJSON_Delete(a);
        return;
    }
    if (!got || strcmp(got, code)) fail_msg("'%s': code %s, expected %s", message, got ? got : "(none)", code);
    int n = 0;
    for (; args && args[n]; n++) {
        const cJSON *v = cJSON_GetArrayItem(a, n);
        assert_non_null(v);
        assert_string_equal(v->valuestring, args[n]);
    }
    assert_int_equal(cJSON_GetArraySize(a), n);
    cJSON_Delete(a);
}

static void test_codes(void **state) {
    (void)state;
    expect_code("this needs an admin key", "admin_key_required", NULL);
    expect_code("no clause with id 419", "no_clause_with_id", (const char *const[]){"419", NULL});
    expect_code("this key may not edit knowledge base '法规'", "key_may_not",
                (const char *const[]){"edit", "法规", NULL});
    expect_code("document 3 has 12 pages; there is no page 40", "no_such_page",
                (const char *const[]){"3", "12", "40", NULL});
    /* a specific format before a general one that would fit too ("invalid %s '%s'") */
    expect_code("invalid knowledge base name 'a/b'", "kb_name_invalid", (const char *const[]){"a/b", NULL});
    expect_code("invalid Host 'x'", "invalid_header", (const char *const[]){"Host", "x", NULL});
    expect_code("the URL holds an encoded NUL byte (%00)", "url_nul_byte", NULL);
    expect_code("\"k\" must be a number from 1 to 50", "k_range", NULL);
    /* a number conversion takes digits only */
    expect_code("no clause with id abc", NULL, NULL);
    expect_code("no clause with id 419 or more", NULL, NULL);
    expect_code("something the catalog does not know", NULL, NULL);
    expect_code("", NULL, NULL);
    assert_null(cq_web_message_code(NULL, NULL));
    /* every code is unique */
    for (size_t i = 0; i < cq_web_n_messages; i++)
        for (size_t k = i + 1; k < cq_web_n_messages; k++)
            if (!strcmp(cq_web_messages[i].code, cq_web_messages[k].code))
                fail_msg("code %s twice", cq_web_messages[i].code);
}

static void expect_plain(const char *why, const char *plain) {
    char out[256] = "untouched";
    bool changed = cq_plain_reason(why, out, sizeof out);
    if (!plain) {
        assert_false(changed);
        assert_string_equal(out, "untouched");
        return;
    }
    assert_true(changed);
    assert_string_equal(out, plain);
    if (strstr(plain, "pages cannot"))
        expect_code(out, "pdf_pages_unreadable", (const char *const[]){"2", "9", NULL});
    else
        expect_code(out, "pdf_damaged", NULL);
}

static void test_plain_reasons(void **state) {
    (void)state;
    expect_plain("the PDF has no pages [MuPDF: cannot load object (2 0 R) into cache]",
                 "the PDF is damaged and cannot be read");
    expect_plain("the PDF has no pages (damaged or truncated: MuPDF rebuilt it and found none) [MuPDF: object "
                 "missing 'endobj' token]",
                 "the PDF is damaged and cannot be read");
    expect_plain("damaged PDF, MuPDF cannot read it (no objects found)", "the PDF is damaged and cannot be read");
    expect_plain("damaged PDF: none of its 3 pages can be read (cannot find page tree)",
                 "the PDF is damaged and cannot be read");
    expect_plain("damaged or truncated PDF: MuPDF rebuilt it but 2 of 9 pages cannot be read (bad xref)",
                 "the PDF is damaged: 2 of its 9 pages cannot be read");
    /* plain already: kept */
    expect_plain("encrypted PDF: a password is required", NULL);
    expect_plain("the file is empty", NULL);
    expect_plain(NULL, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codes),
        cmocka_unit_test(test_plain_reasons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
