/* reader/: the HTML reader (tests/unit/test_app_ingest_formats.c takes HTML pages through ingest).
 *
 * Pages written here: a government notice as such sites make them (navigation, header and footer, scripts, a
 * layout table around the content, a data table, lists, hidden elements), the same page in GB2312 declared in a
 * <meta> (and undeclared), and broken or empty ones. */
#include <iconv.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>

#include <cmocka.h>

#include "core/strbuf.h"
#include "reader/reader.h"

static cq_status read_html(const char *data, size_t len, cq_doctext *d, cq_err *err) {
    cq_reader_input in = {.path = "page.html", .data = data, .len = len};
    return cq_reader_format_named("html")->read(&in, d, err);
}

#define HEAD(charset_meta)                                                                                           \
    "<!DOCTYPE html><html><head>" charset_meta "<title>  关于印发《电子文件管理办法》的通知 - 某市人民政府 </title>"  \
    "<style>p { color: red; }</style><script>var x = '<p>不显示</p>';</script></head>"

#define BODY                                                                                                         \
    "<body><header><div class=\"logo\">某市人民政府</div><nav><a href=\"/\">首页</a> | <a>政务公开</a></nav></header>" \
    "<div role=\"navigation\">当前位置：首页 &gt; 通知</div>"                                                         \
    "<table width=\"100%\"><tr><td class=\"side\"><nav><ul><li>栏目一</li></ul></nav></td><td>"                                  \
    "<main><article><header><h1>电子文件管理办法</h1></header>"                                                        \
    "<h2>第一章　总则</h2>"                                                                                           \
    "<p>第一条　为了规范电子文件的管理，\n   制定本办法。</p>"                                                         \
    "<p>第二条　电子文件应当及时归档：</p>"                                                                            \
    "<ol type=\"1\"><li>真实、完整；</li><li>安全&nbsp;可靠。</li></ol>"                                               \
    "<h3>2024年度归档要求</h3>"                                                                                       \
    "<p>第三条　归档期限如下：<br>按年度归档。</p>"                                                                    \
    "<table><thead><tr><th>类别</th><th>期限</th></tr></thead>"                                                       \
    "<tbody><tr><td>文书</td><td><p>永久</p></td></tr><tr><td>会计</td><td>三十年</td></tr></tbody></table>"          \
    "<ul><li>纸质文件<b>同时</b>归档</li></ul>"                                                                        \
    "<p style=\"display: none\">隐藏的段落</p><p hidden>也隐藏</p><span aria-hidden=\"true\">图标</span>"           \
    "<pre>第四条 本办法\n自发布之日起施行。</pre>"                                                                    \
    "<noscript>请启用脚本</noscript><button>打印</button>"                                                           \
    "<footer>发布日期：2024-01-01</footer></article></main>"                                                          \
    "</td></tr></table><aside>相关链接</aside><footer>版权所有 某市人民政府</footer>"                                  \
    "<script>document.write('不显示');</script></body></html>"

static const char *const EXPECTED =
    "电子文件管理办法\n"
    "第一章 总则\n"
    "第一条 为了规范电子文件的管理，制定本办法。\n"
    "第二条 电子文件应当及时归档：\n"
    "1. 真实、完整；\n"
    "2. 安全 可靠。\n"
    "2024年度归档要求\n"
    "第三条 归档期限如下：\n"
    "按年度归档。\n"
    "类别 | 期限\n"
    "文书 | 永久\n"
    "会计 | 三十年\n"
    "• 纸质文件同时归档\n"
    "第四条 本办法\n"
    "自发布之日起施行。\n"
    "发布日期：2024-01-01";

static const cq_clause *clause_labelled(const cq_structure *st, const char *label) {
    for (size_t i = 0; i < st->n_clauses; i++)
        if (st->clauses[i].label && !strcmp(st->clauses[i].label, label)) return &st->clauses[i];
    return NULL;
}

static void check_page(const cq_doctext *d) {
    assert_string_equal(d->text, EXPECTED);
    assert_int_equal(d->n_pages, 0);
    assert_string_equal(d->title, "关于印发《电子文件管理办法》的通知 - 某市人民政府");
    assert_int_equal(d->n_headings, 3);
    assert_int_equal(d->headings[0].level, 1);
    assert_int_equal(d->headings[1].level, 2);
    assert_int_equal(d->headings[2].level, 3);
    const char *h2 = "2024年度归档要求";
    assert_memory_equal(d->text + d->headings[2].start, h2, strlen(h2));
    cq_structure st;
    cq_err err = {0};
    assert_int_equal(cq_structure_parse(d, &st, &err), CQ_OK);
    assert_string_equal(st.title, "电子文件管理办法");
    const cq_clause *c2 = clause_labelled(&st, "第二条");
    assert_non_null(c2);
    assert_string_equal(c2->path, "第一章 总则 > 第二条");
    assert_string_equal(c2->text, "第二条 电子文件应当及时归档：\n1. 真实、完整；\n2. 安全 可靠。");
    const cq_clause *c3 = clause_labelled(&st, "第三条");
    assert_non_null(c3);
    assert_string_equal(c3->path, "第一章 总则 > 2024年度归档要求 > 第三条");
    assert_non_null(strstr(c3->text, "文书 | 永久"));
    assert_non_null(clause_labelled(&st, "第四条"));
    cq_structure_free(&st);
}

static void test_page(void **state) {
    (void)state;
    const char *page = HEAD("<meta charset=\"utf-8\">") BODY;
    cq_doctext d;
    cq_err err = {0};
    cq_status rc = read_html(page, strlen(page), &d, &err);
    if (rc) fail_msg("%s", err.msg);
    check_page(&d);
    cq_doctext_free(&d);
}

/* The page in GB2312, as many Chinese government sites still serve it. */
static char *to_gbk(const char *utf8, size_t *out_len) {
    iconv_t cd = iconv_open("GB18030", "UTF-8");
    assert_true(cd != (iconv_t)-1);
    size_t in_left = strlen(utf8), cap = in_left * 2 + 16, out_left = cap;
    char *out = malloc(cap), *o = out, *in = (char *)utf8;
    assert_true(iconv(cd, &in, &in_left, &o, &out_left) != (size_t)-1);
    iconv_close(cd);
    *out_len = cap - out_left;
    return out;
}

static void test_charsets(void **state) {
    (void)state;
    const char *declared[] = {
        HEAD("<meta http-equiv=\"Content-Type\" content=\"text/html; charset=gb2312\">") BODY,
        HEAD("<META CHARSET='GBK'>") BODY,
        HEAD("") BODY, /* undeclared: not UTF-8, so GB18030 */
    };
    for (size_t i = 0; i < sizeof declared / sizeof declared[0]; i++) {
        size_t len;
        char *gbk = to_gbk(declared[i], &len);
        cq_doctext d;
        cq_err err = {0};
        cq_status rc = read_html(gbk, len, &d, &err);
        if (rc) fail_msg("page %zu: %s", i, err.msg);
        check_page(&d);
        assert_true(d.quality > 0.99);
        cq_doctext_free(&d);
        free(gbk);
    }
    /* issue 29: one bad byte in a GBK page (here 0xFF, which no GB18030 sequence has) spoils only itself: iconv used
     * to refuse the page, which was then read as UTF-8 with every Chinese character replaced (quality 0) */
    for (size_t i = 0; i < 2; i++) {
        size_t len;
        char *gbk = to_gbk(declared[i == 0 ? 0 : 2], &len);
        char *bad = malloc(len + 1);
        const char *at = strstr(gbk, "<h1>") + 4; /* before the h1's first character */
        size_t k = (size_t)(at - gbk);
        memcpy(bad, gbk, k);
        bad[k] = (char)0xFF;
        memcpy(bad + k + 1, gbk + k, len - k);
        cq_doctext d;
        cq_err err = {0};
        assert_int_equal(read_html(bad, len + 1, &d, &err), CQ_OK);
        check_page(&d); /* U+FFFD is dropped by the repair, and counted */
        assert_true(d.quality > 0.9 && d.quality < 1);
        cq_doctext_free(&d);
        free(bad);
        free(gbk);
    }
    /* a UTF-8 byte-order mark, and UTF-16 */
    cq_strbuf b = {0};
    cq_strbuf_puts(&b, "\xEF\xBB\xBF<p>第一条　内容。</p>");
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(read_html(b.data, b.len, &d, &err), CQ_OK);
    assert_string_equal(d.text, "第一条 内容。");
    cq_doctext_free(&d);
    cq_strbuf_free(&b);
    const char utf16[] = "\xFF\xFE<\0p\0>\0\x2C\x7B\0\x4E\x61\x67\x85\x51\xB9\x5B\x02\x30"; /* <p>第一条内容。 */
    assert_int_equal(read_html(utf16, sizeof utf16 - 1, &d, &err), CQ_OK);
    assert_string_equal(d.text, "第一条内容。");
    cq_doctext_free(&d);
}

/* Tables: data rows on a line each; a table of one column, or with long cells, is layout: its paragraphs stay. */
static void test_tables(void **state) {
    (void)state;
    const char *page =
        "<table><tr><td><p>第一条 甲。</p><p>第二条 乙。</p><p>第三条 丙。</p><p>第四条 丁。</p></td>"
        "<td>右栏</td></tr></table>"
        "<table><tr><td>单列一</td></tr><tr><td>单列二</td></tr></table>"
        "<table><caption>表一</caption><tr><td> a </td><td></td><td>b<br>c</td></tr></table>";
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(read_html(page, strlen(page), &d, &err), CQ_OK);
    assert_string_equal(d.text, "第一条 甲。\n第二条 乙。\n第三条 丙。\n第四条 丁。\n右栏\n单列一\n单列二\n表一\na | b c");
    cq_doctext_free(&d);
}

/* List numbers from start / value attributes beyond any int (found by fuzz_reader: counting on from LONG_MAX
 * overflowed): kept within 32 bits, as browsers keep them. */
static void test_huge_list_numbers(void **state) {
    (void)state;
    const char *page = "<ol start=\"288888888888888888888888888888\"><li>一</li><li>二</li></ol>"
                       "<ol reversed start=\"-99999999999999999999\"><li>三</li><li>四</li></ol>"
                       "<ol><li value=\"9223372036854775807\">五</li><li>六</li></ol>";
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(read_html(page, strlen(page), &d, &err), CQ_OK);
    assert_string_equal(d.text, "2147483647. 一\n2147483648. 二\n-2147483647. 三\n-2147483648. 四\n"
                                "2147483647. 五\n2147483648. 六");
    cq_doctext_free(&d);
}

static void test_bad_pages(void **state) {
    (void)state;
    cq_doctext d;
    cq_err err = {0};
    /* nested deeper than a page may be: refused before parsing */
    cq_strbuf b = {0};
    cq_strbuf_puts(&b, "<html><body>");
    for (int i = 0; i < 100000; i++) cq_strbuf_puts(&b, "<div>");
    cq_strbuf_puts(&b, "深处");
    assert_int_equal(read_html(b.data, b.len, &d, &err), CQ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "the HTML nests elements more than 1000 deep (the most a page may have)"));
    assert_string_equal(cq_err_name(&err), "too_deep");
    assert_null(d.text);
    cq_strbuf_free(&b);
    /* elements that may stay open (p, li) and void ones (br, img) do not count as nesting */
    for (int i = 0; i < 3000; i++) cq_strbuf_puts(&b, "<p>段落<br><img src=x><li>项");
    assert_int_equal(read_html(b.data, b.len, &d, &err), CQ_OK);
    cq_doctext_free(&d);
    cq_strbuf_free(&b);
    /* nothing visible */
    const char *invisible = "<html><head><title>标题</title><script>x()</script></head><body><nav>菜单</nav>"
                            "<div style=\"visibility:hidden\">看不见</div></body></html>";
    assert_int_equal(read_html(invisible, strlen(invisible), &d, &err), CQ_ERR_EMPTY);
    assert_string_equal(err.msg, "the HTML page has no visible text");
    assert_null(d.text);
    assert_null(d.title);
    assert_int_equal(read_html("", 0, &d, &err), CQ_ERR_EMPTY);
    /* broken markup is read as browsers read it */
    const char *broken = "<p>第一条 <b>未闭合<p>第二条 内容</table></div>";
    assert_int_equal(read_html(broken, strlen(broken), &d, &err), CQ_OK);
    assert_string_equal(d.text, "第一条 未闭合\n第二条 内容");
    cq_doctext_free(&d);
    /* invalid UTF-8 declared as UTF-8 and not GB18030 either: read with replacements, which the quality shows */
    const char bad_bytes[] = "<meta charset=utf-8><p>text \xff\xfe\xff more text</p>";
    assert_int_equal(read_html(bad_bytes, sizeof bad_bytes - 1, &d, &err), CQ_OK);
    assert_true(d.quality < 1);
    cq_doctext_free(&d);
}

/* CPU time of this thread: what the readers cost, whatever else the machine runs */
static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Issue 29: hostile shapes that cost more than linear time, or nest deeper than the pre-scan saw. */
static void test_hostile_shapes(void **state) {
    (void)state;
    cq_doctext d;
    cq_err err = {0};
    cq_strbuf b = {0};
    /* one text node of 2 MB with a white-space run every few bytes: put_text measured the rest of the node at each
     * run (0.5 MB 1.2 s, 2 MB 20 s); now well under a second */
    cq_strbuf_puts(&b, "<p>");
    while (b.len < (2u << 20)) cq_strbuf_puts(&b, "word \n ");
    cq_strbuf_puts(&b, "</p>");
    double t0 = now_s();
    assert_int_equal(read_html(b.data, b.len, &d, &err), CQ_OK);
    double took = now_s() - t0;
    printf("2 MB of white-space runs: %.2f s\n", took);
    assert_true(took < 3.0);
    assert_int_equal(strncmp(d.text, "word word word", 14), 0);
    cq_doctext_free(&d);
    cq_strbuf_free(&b);
    /* <div></i> repeated: the stray end tag closes nothing in the parser, so the divs nest 100,000 deep; the pre-scan
     * counted the end tag down and let the page through (60 s in gumbo, then its recursive free overflowed) */
    for (int i = 0; i < 100000; i++) cq_strbuf_puts(&b, "<div></i>");
    cq_strbuf_puts(&b, "深处");
    t0 = now_s();
    assert_int_equal(read_html(b.data, b.len, &d, &err), CQ_ERR_FORMAT);
    assert_string_equal(cq_err_name(&err), "too_deep");
    assert_true(now_s() - t0 < 2.0);
    cq_strbuf_free(&b);
    /* an end tag of an inline element does not close a block inside it: <span><div></span> nests */
    for (int i = 0; i < 2000; i++) cq_strbuf_puts(&b, "<span><div></span>");
    assert_int_equal(read_html(b.data, b.len, &d, &err), CQ_ERR_FORMAT);
    assert_string_equal(cq_err_name(&err), "too_deep");
    cq_strbuf_free(&b);
    /* ... while sloppy pages that leave inline elements open inside blocks stay readable */
    for (int i = 0; i < 3000; i++) cq_strbuf_printf(&b, "<div><b>第%d段</div>", i);
    cq_strbuf_puts(&b, "<div>");
    for (int i = 0; i < 3000; i++) cq_strbuf_printf(&b, "<span><i>第%d句</span></i>", i);
    assert_int_equal(read_html(b.data, b.len, &d, &err), CQ_OK);
    cq_doctext_free(&d);
    cq_strbuf_free(&b);
    /* cells close what was left open in them, as the parser closes it: these tables were refused as too deep */
    cq_strbuf_puts(&b, "<table>");
    for (int i = 0; i < 3000; i++)
        cq_strbuf_printf(&b, i % 2 ? "<tr><td><b>%d</td><td>y</td></tr>" : "<tr><td><font color=red>%d<td><div>y", i);
    cq_strbuf_puts(&b, "</table>");
    { cq_status rc_ = read_html(b.data, b.len, &d, &err); if (rc_) fail_msg("%s", err.msg); }
    assert_non_null(strstr(d.text, "2999 | y"));
    cq_doctext_free(&d);
    cq_strbuf_free(&b);
    /* ... but outside a table the parser ignores cell tags: they close nothing */
    for (int i = 0; i < 2000; i++) cq_strbuf_puts(&b, "<td><div>");
    assert_int_equal(read_html(b.data, b.len, &d, &err), CQ_ERR_FORMAT);
    assert_string_equal(cq_err_name(&err), "too_deep");
    cq_strbuf_free(&b);
    /* a formatting element left open in a block is reopened after it, one deeper each time: gumbo's scope checks
     * made this quadratic (1 MB 10 s, 2 MB 45 s of CPU); the parse now has a CPU time linear in the page's size (2 s
     * for this one) */
    while (b.len < (512u << 10)) cq_strbuf_puts(&b, "<div><b>x</div><i>y</i>");
    t0 = now_s();
    assert_int_equal(read_html(b.data, b.len, &d, &err), CQ_ERR_FORMAT);
    took = now_s() - t0;
    printf("512 KB of reopened formatting elements: %s (%.2f s)\n", err.msg, took);
    assert_string_equal(cq_err_name(&err), "too_deep");
    assert_true(took < 4.0);
    cq_strbuf_free(&b);
    /* a tag with 100,000 attributes: gumbo compares each with the others */
    cq_strbuf_puts(&b, "<p");
    for (int i = 0; i < 100000; i++) cq_strbuf_printf(&b, " a%d", i);
    cq_strbuf_puts(&b, ">文字</p>");
    t0 = now_s();
    assert_int_equal(read_html(b.data, b.len, &d, &err), CQ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "a tag of the HTML has 100000 attributes, more than the 1000 a tag may have"));
    assert_true(now_s() - t0 < 2.0);
    cq_strbuf_free(&b);
}

/* The parser's tree counts against the document's memory budget; a set cancel flag stops the reading. */
static void test_budget_and_cancel(void **state) {
    (void)state;
    cq_strbuf b = {0};
    while (b.len < (4u << 20)) cq_strbuf_puts(&b, "<p class=a>第一条 文字。</p>");
    cq_doctext d;
    cq_err err = {0};
    cq_reader_limits lim = {.max_bytes = 8u << 20};
    cq_reader_input in = {.path = "page.html", .data = b.data, .len = b.len, .limits = &lim};
    const cq_reader_format *f = cq_reader_format_named("html");
    assert_int_equal(f->read(&in, &d, &err), CQ_ERR_TOO_LARGE);
    assert_non_null(strstr(err.msg, "parsing the HTML"));
    assert_null(d.text);
    lim.max_bytes = 512u << 20;
    assert_int_equal(f->read(&in, &d, &err), CQ_OK);
    cq_doctext_free(&d);
    atomic_bool cancel = true;
    lim.cancel = &cancel;
    assert_int_equal(f->read(&in, &d, &err), CQ_ERR_CANCELLED);
    assert_null(d.text);
    cq_strbuf_free(&b);
}

/* On a thread of 1 MB of stack (the service's floor, app/stack_floor.c): `<div></i>` x100k made gumbo a tree
 * 100,000 deep whose recursive free overflowed such a stack; formatting elements reopened ever deeper make a tree of
 * thousands of levels that gumbo builds within the parse's time. Neither may crash: the first is refused before
 * gumbo, the second's tree is freed by the allocation list. */
typedef struct {
    const char *piece;
    int times;
    cq_status rc;
    char name[32];
} deep_job;

static void *read_deep(void *arg) {
    deep_job *j = arg;
    cq_strbuf b = {0};
    for (int i = 0; i < j->times; i++) cq_strbuf_puts(&b, j->piece);
    cq_doctext d;
    cq_err err = {0};
    j->rc = read_html(b.data, b.len, &d, &err);
    snprintf(j->name, sizeof j->name, "%s", j->rc ? cq_err_name(&err) : "ok");
    if (!j->rc) cq_doctext_free(&d);
    cq_strbuf_free(&b);
    return NULL;
}

static void test_deep_trees_on_small_stacks(void **state) {
    (void)state;
    deep_job jobs[] = {{"<div></i>", 100000, 0, ""}, {"<div><b>x</div><i>y</i>", 8000, 0, ""}};
    for (size_t k = 0; k < sizeof jobs / sizeof *jobs; k++) {
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, 1u << 20);
        pthread_t t;
        assert_int_equal(pthread_create(&t, &at, read_deep, &jobs[k]), 0);
        pthread_join(t, NULL);
        pthread_attr_destroy(&at);
        assert_int_equal(jobs[k].rc, CQ_ERR_FORMAT);
        assert_string_equal(jobs[k].name, "too_deep");
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_shapes),
        cmocka_unit_test(test_budget_and_cancel),
        cmocka_unit_test(test_deep_trees_on_small_stacks),
        cmocka_unit_test(test_page),
        cmocka_unit_test(test_charsets),
        cmocka_unit_test(test_tables),
        cmocka_unit_test(test_huge_list_numbers),
        cmocka_unit_test(test_bad_pages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
