/* reader/: the Word (DOCX) reader (tests/unit/test_app_ingest_formats.c takes Word files through ingest).
 *
 * The fixtures are made here with libzip: a document with a title, headings whose numbers come from Word's
 * numbering ("第一章" is not in the text), articles, a numbered list, a table, and text Word would not show
 * (hidden, deleted, a field's instruction, a table of contents); then broken ones: truncated, without
 * word/document.xml, a zip bomb, an XML entity bomb, XML nested too deep, XML that is not well-formed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <zip.h>

#include "core/fileio.h"
#include "core/strbuf.h"
#include "reader/reader.h"

#define W_NS "xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\""

static const char *const STYLES =
    "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>"
    "<w:styles " W_NS ">"
    "<w:style w:type=\"paragraph\" w:default=\"1\" w:styleId=\"a\"><w:name w:val=\"Normal\"/></w:style>"
    "<w:style w:type=\"paragraph\" w:styleId=\"a3\"><w:name w:val=\"Title\"/><w:basedOn w:val=\"a\"/></w:style>"
    /* Chinese Word names its heading styles "heading 1" in the file and shows 标题 1; this one is numbered */
    "<w:style w:type=\"paragraph\" w:styleId=\"1\"><w:name w:val=\"heading 1\"/><w:basedOn w:val=\"a\"/>"
    "<w:pPr><w:numPr><w:numId w:val=\"2\"/></w:numPr><w:outlineLvl w:val=\"0\"/></w:pPr></w:style>"
    /* a style derived from a heading style is a heading of its level */
    "<w:style w:type=\"paragraph\" w:styleId=\"20\"><w:name w:val=\"标题 2\"/><w:basedOn w:val=\"a\"/></w:style>"
    "<w:style w:type=\"paragraph\" w:styleId=\"MyHeading\"><w:name w:val=\"My Heading\"/>"
    "<w:basedOn w:val=\"20\"/></w:style>"
    "<w:style w:type=\"paragraph\" w:styleId=\"TOC1\"><w:name w:val=\"toc 1\"/></w:style>"
    "</w:styles>";

static const char *const NUMBERING =
    "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>"
    "<w:numbering " W_NS ">"
    "<w:abstractNum w:abstractNumId=\"0\">"
    "<w:lvl w:ilvl=\"0\"><w:start w:val=\"1\"/><w:numFmt w:val=\"chineseCounting\"/><w:lvlText w:val=\"（%1）\"/>"
    "<w:suff w:val=\"nothing\"/></w:lvl>"
    "<w:lvl w:ilvl=\"1\"><w:start w:val=\"1\"/><w:numFmt w:val=\"decimal\"/><w:lvlText w:val=\"%2.\"/></w:lvl>"
    "</w:abstractNum>"
    "<w:abstractNum w:abstractNumId=\"1\">"
    "<w:lvl w:ilvl=\"0\"><w:start w:val=\"1\"/><w:numFmt w:val=\"chineseCounting\"/><w:lvlText w:val=\"第%1章\"/>"
    "<w:suff w:val=\"space\"/></w:lvl>"
    "</w:abstractNum>"
    "<w:abstractNum w:abstractNumId=\"2\">"
    "<w:lvl w:ilvl=\"0\"><w:numFmt w:val=\"bullet\"/><w:lvlText w:val=\"\xef\x82\xb7\"/></w:lvl>"
    "</w:abstractNum>"
    "<w:num w:numId=\"1\"><w:abstractNumId w:val=\"0\"/></w:num>"
    "<w:num w:numId=\"2\"><w:abstractNumId w:val=\"1\"/></w:num>"
    "<w:num w:numId=\"3\"><w:abstractNumId w:val=\"2\"/></w:num>"
    /* the same list restarted */
    "<w:num w:numId=\"4\"><w:abstractNumId w:val=\"0\"/>"
    "<w:lvlOverride w:ilvl=\"0\"><w:startOverride w:val=\"1\"/></w:lvlOverride></w:num>"
    "</w:numbering>";

static const char *const CORE =
    "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>"
    "<cp:coreProperties xmlns:cp=\"http://schemas.openxmlformats.org/package/2006/metadata/core-properties\" "
    "xmlns:dc=\"http://purl.org/dc/elements/1.1/\"><dc:title>模板</dc:title></cp:coreProperties>";

#define P(style, text) "<w:p><w:pPr><w:pStyle w:val=\"" style "\"/></w:pPr><w:r><w:t>" text "</w:t></w:r></w:p>"
#define PLAIN(text) "<w:p><w:r><w:t xml:space=\"preserve\">" text "</w:t></w:r></w:p>"
#define ITEM(num, lvl, text)                                                                                         \
    "<w:p><w:pPr><w:numPr><w:ilvl w:val=\"" lvl "\"/><w:numId w:val=\"" num "\"/></w:numPr></w:pPr>"                  \
    "<w:r><w:t>" text "</w:t></w:r></w:p>"
#define CELL(text) "<w:tc><w:p><w:r><w:t>" text "</w:t></w:r></w:p></w:tc>"

static const char *const BODY =
    P("TOC1", "第一章 总则\t1")
    P("a3", "电子文件管理办法")
    P("1", "总则")
    PLAIN("第一条 为了规范电子文件的管理，制定本办法。")
    /* a run split in three, hidden text, a deletion, a field's instruction and its result, a tab */
    "<w:p><w:r><w:t>第二条 电子文件</w:t></w:r><w:r><w:rPr><w:vanish/></w:rPr><w:t>（隐藏）</w:t></w:r>"
    "<w:del><w:r><w:delText>已删除</w:delText></w:r></w:del><w:ins><w:r><w:t>应当</w:t></w:r></w:ins>"
    "<w:r><w:fldChar w:fldCharType=\"begin\"/></w:r><w:r><w:instrText>HYPERLINK \"x\"</w:instrText></w:r>"
    "<w:r><w:fldChar w:fldCharType=\"separate\"/></w:r><w:hyperlink><w:r><w:t>及时</w:t></w:r></w:hyperlink>"
    "<w:r><w:fldChar w:fldCharType=\"end\"/></w:r><w:r><w:t>归档：</w:t></w:r></w:p>"
    ITEM("1", "0", "真实、完整；")
    ITEM("1", "1", "可以读取；")
    ITEM("1", "1", "可以检索；")
    ITEM("1", "0", "安全可靠。")
    P("MyHeading", "2024年度归档要求")
    "<w:p><w:r><w:t>第三条 归档期限如下：</w:t></w:r><w:r><w:br/></w:r><w:r><w:t>按年度归档。</w:t></w:r></w:p>"
    "<w:tbl><w:tr>" CELL("类别") CELL("期限") "</w:tr>"
    "<w:tr>" CELL("文书") CELL("永久") "</w:tr>"
    "<w:tr>" CELL("会计") "<w:tc><w:p><w:r><w:t>三十年</w:t></w:r></w:p><w:p><w:r><w:t>（另有规定的除外）</w:t></w:r></w:p></w:tc>"
    "</w:tr></w:tbl>"
    ITEM("3", "0", "纸质文件同时归档")
    P("1", "附则")
    ITEM("4", "0", "重新编号的一项。")
    PLAIN("第四条 本办法自发布之日起施行。");

static const char *const EXPECTED_TEXT =
    "电子文件管理办法\n"
    "第一章 总则\n"
    "第一条 为了规范电子文件的管理，制定本办法。\n"
    "第二条 电子文件应当及时归档：\n"
    "（一）真实、完整；\n"
    "1. 可以读取；\n"
    "2. 可以检索；\n"
    "（二）安全可靠。\n"
    "2024年度归档要求\n"
    "第三条 归档期限如下：\n"
    "按年度归档。\n"
    "类别 | 期限\n"
    "文书 | 永久\n"
    "会计 | 三十年 （另有规定的除外）\n"
    "• 纸质文件同时归档\n"
    "第二章 附则\n"
    "（一）重新编号的一项。\n"
    "第四条 本办法自发布之日起施行。";

typedef struct {
    const char *name;
    const char *data;
    size_t len;
} part;

/* Writes a zip of the parts to path; its bytes are returned (malloc'd) in *out. */
static char *make_zip(const char *path, const part *parts, size_t n, size_t *out_len) {
    int zerr = 0;
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    assert_non_null(z);
    for (size_t i = 0; i < n; i++) {
        zip_source_t *src = zip_source_buffer(z, parts[i].data, parts[i].len ? parts[i].len : strlen(parts[i].data), 0);
        assert_non_null(src);
        assert_true(zip_file_add(z, parts[i].name, src, ZIP_FL_ENC_UTF_8) >= 0);
    }
    assert_int_equal(zip_close(z), 0);
    char *b;
    cq_err err = {0};
    assert_int_equal(cq_file_read(path, 0, &b, out_len, &err), CQ_OK);
    return b;
}

static char *document_xml(const char *body) {
    cq_strbuf b = {0};
    cq_strbuf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>"
                         "<w:document " W_NS "><w:body>%s<w:sectPr/></w:body></w:document>", body);
    return cq_strbuf_take(&b);
}

static char tmp_path[128];

static char *good_docx(size_t *len) {
    char *doc = document_xml(BODY);
    part parts[] = {{"[Content_Types].xml", "<Types/>", 0}, {"word/document.xml", doc, 0}, {"word/styles.xml", STYLES, 0},
                    {"word/numbering.xml", NUMBERING, 0}, {"docProps/core.xml", CORE, 0}};
    char *z = make_zip(tmp_path, parts, sizeof parts / sizeof parts[0], len);
    free(doc);
    return z;
}

static cq_status read_docx(const char *data, size_t len, cq_doctext *d, cq_err *err) {
    cq_reader_input in = {.path = tmp_path, .data = data, .len = len};
    return cq_reader_format_named("docx")->read(&in, d, err);
}

static int setup(void **state) {
    (void)state;
    snprintf(tmp_path, sizeof tmp_path, "/tmp/cq_docx_test_%d.docx", (int)getpid());
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(tmp_path);
    return 0;
}

/* ---- a good document -------------------------------------------------------------------------------------- */

static const cq_clause *clause_labelled(const cq_structure *st, const char *label) {
    for (size_t i = 0; i < st->n_clauses; i++)
        if (st->clauses[i].label && !strcmp(st->clauses[i].label, label)) return &st->clauses[i];
    return NULL;
}

static void test_document(void **state) {
    (void)state;
    size_t len;
    char *z = good_docx(&len);
    cq_doctext d;
    cq_err err = {0};
    cq_status rc = read_docx(z, len, &d, &err);
    if (rc) fail_msg("%s", err.msg);
    assert_string_equal(d.text, EXPECTED_TEXT);
    assert_int_equal(d.n_pages, 0);
    assert_null(d.pages);
    assert_int_equal(d.n_glyphs, 0);
    assert_string_equal(d.title, "电子文件管理办法"); /* the Title paragraph, not the template's property */
    /* headings: 第一章 总则 (Heading 1), 2024年度归档要求 (a style based on 标题 2), 第二章 附则 */
    assert_int_equal(d.n_headings, 3);
    const char *want[] = {"第一章 总则", "2024年度归档要求", "第二章 附则"};
    int levels[] = {1, 2, 1};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(d.headings[i].level, levels[i]);
        assert_int_equal(d.headings[i].end - d.headings[i].start, strlen(want[i]));
        assert_memory_equal(d.text + d.headings[i].start, want[i], strlen(want[i]));
    }

    cq_structure st;
    assert_int_equal(cq_structure_parse(&d, &st, &err), CQ_OK);
    assert_string_equal(st.title, "电子文件管理办法");
    const cq_clause *c2 = clause_labelled(&st, "第二条");
    assert_non_null(c2);
    assert_string_equal(c2->path, "第一章 总则 > 第二条");
    assert_string_equal(c2->text, "第二条 电子文件应当及时归档：\n（一）真实、完整；\n1. 可以读取；\n2. 可以检索；\n"
                                  "（二）安全可靠。");
    assert_int_equal(c2->page_first, 0);
    /* the marked heading ends 第二条 and heads 第三条, although its words alone would not make it a heading */
    const cq_clause *c3 = clause_labelled(&st, "第三条");
    assert_non_null(c3);
    assert_string_equal(c3->path, "第一章 总则 > 2024年度归档要求 > 第三条");
    assert_non_null(strstr(c3->text, "会计 | 三十年 （另有规定的除外）"));
    const cq_clause *c4 = clause_labelled(&st, "第四条");
    assert_non_null(c4);
    assert_string_equal(c4->label_key, "4");
    assert_string_equal(c4->path, "第二章 附则 > 第四条");
    /* no boxes without pages */
    cq_box *boxes;
    assert_int_equal(cq_doctext_boxes(&d, c4->start, c4->end, &boxes), 0);
    assert_null(boxes);
    cq_structure_free(&st);
    cq_doctext_free(&d);
    free(z);
}

/* English headings without numbers, strict-namespace-free defaults: no styles part, no numbering part. */
static void test_minimal_english(void **state) {
    (void)state;
    char *doc = document_xml("<w:p><w:pPr><w:outlineLvl w:val=\"0\"/></w:pPr><w:r><w:t>Services Agreement</w:t></w:r></w:p>"
                             PLAIN("This Agreement is made between Alpha and Beta.")
                             "<w:p><w:pPr><w:outlineLvl w:val=\"1\"/></w:pPr><w:r><w:t>Payment</w:t></w:r></w:p>"
                             PLAIN("Beta pays within thirty days.")
                             "<w:p><w:pPr><w:outlineLvl w:val=\"1\"/></w:pPr><w:r><w:t>Term</w:t></w:r></w:p>"
                             PLAIN("This Agreement runs for two years."));
    part parts[] = {{"word/document.xml", doc, 0}};
    size_t len;
    char *z = make_zip(tmp_path, parts, 1, &len);
    cq_doctext d;
    cq_err err = {0};
    cq_status rc = read_docx(z, len, &d, &err);
    if (rc) fail_msg("%s", err.msg);
    assert_string_equal(d.text, "Services Agreement\nThis Agreement is made between Alpha and Beta.\nPayment\n"
                                "Beta pays within thirty days.\nTerm\nThis Agreement runs for two years.");
    assert_int_equal(d.n_headings, 3);
    cq_structure st;
    assert_int_equal(cq_structure_parse(&d, &st, &err), CQ_OK);
    bool payment = false, term = false;
    for (size_t i = 0; i < st.n_clauses; i++) {
        if (strstr(st.clauses[i].text, "thirty days")) payment = !strcmp(st.clauses[i].path, "Payment");
        if (strstr(st.clauses[i].text, "two years")) term = !strcmp(st.clauses[i].path, "Term");
    }
    assert_true(payment);
    assert_true(term);
    cq_structure_free(&st);
    cq_doctext_free(&d);
    free(z);
    free(doc);
}

/* ---- bad documents ---------------------------------------------------------------------------------------- */

static void expect_failure(const char *data, size_t len, cq_status code, const char *message) {
    cq_doctext d;
    cq_err err = {0};
    cq_status rc = read_docx(data, len, &d, &err);
    if (rc != code || !strstr(err.msg, message))
        fail_msg("expected %s with \"%s\", got %s: %s", cq_status_name(code), message, cq_status_name(rc), err.msg);
    assert_null(d.text);
    assert_null(d.headings);
}

static void test_bad_documents(void **state) {
    (void)state;
    size_t len;
    char *z = good_docx(&len);
    /* truncated: the central directory is gone */
    expect_failure(z, len / 2, CQ_ERR_FORMAT, "damaged or truncated Word file: not a readable zip archive");
    expect_failure(z, 10, CQ_ERR_FORMAT, "damaged or truncated Word file");
    expect_failure("", 0, CQ_ERR_EMPTY, "empty");
    free(z);

    /* a zip, but no Word document in it */
    part other[] = {{"readme.txt", "hello", 0}};
    z = make_zip(tmp_path, other, 1, &len);
    expect_failure(z, len, CQ_ERR_FORMAT, "a zip archive but not a Word document (no word/document.xml)");
    free(z);

    /* a zip bomb: 80 MB of spaces that compress to almost nothing */
    size_t big = 80u << 20;
    char *huge = malloc(big + 1);
    memset(huge, ' ', big);
    huge[big] = 0;
    memcpy(huge, "<w:document>", 12);
    part bomb[] = {{"word/document.xml", huge, big}};
    z = make_zip(tmp_path, bomb, 1, &len);
    assert_true(len < (1u << 20));
    expect_failure(z, len, CQ_ERR_UNSUPPORTED, "zip bomb");
    free(z);
    free(huge);

    /* an XML entity bomb ("billion laughs"): refused before libxml2 could expand anything */
    char *lol = document_xml("");
    cq_strbuf b = {0};
    cq_strbuf_puts(&b, "<?xml version=\"1.0\"?><!DOCTYPE w:document [<!ENTITY a \"aaaaaaaaaa\">");
    for (char c = 'b'; c <= 'j'; c++)
        cq_strbuf_printf(&b, "<!ENTITY %c \"&%c;&%c;&%c;&%c;&%c;&%c;&%c;&%c;&%c;&%c;\">", c, c - 1, c - 1, c - 1, c - 1,
                         c - 1, c - 1, c - 1, c - 1, c - 1, c - 1);
    cq_strbuf_puts(&b, "]><w:document " W_NS "><w:body><w:p><w:r><w:t>&j;</w:t></w:r></w:p></w:body></w:document>");
    part entity[] = {{"word/document.xml", b.data, 0}};
    z = make_zip(tmp_path, entity, 1, &len);
    expect_failure(z, len, CQ_ERR_FORMAT, "word/document.xml declares a DTD (<!DOCTYPE>)");
    free(z);
    cq_strbuf_free(&b);
    free(lol);

    /* the same bomb in UTF-16, where a byte search for "<!DOCTYPE" would not see it: not UTF-8, not XML for us */
    const char bomb16_utf8[] = "<?xml version=\"1.0\" encoding=\"UTF-16\"?><!DOCTYPE d [<!ENTITY a \"aaaa\">]><d>&a;</d>";
    char bomb16[2 * sizeof bomb16_utf8 + 2] = {(char)0xFF, (char)0xFE};
    for (size_t i = 0; i + 1 < sizeof bomb16_utf8; i++) bomb16[2 + 2 * i] = bomb16_utf8[i];
    part utf16[] = {{"word/document.xml", bomb16, 2 * (sizeof bomb16_utf8 - 1) + 2}};
    z = make_zip(tmp_path, utf16, 1, &len);
    expect_failure(z, len, CQ_ERR_FORMAT, "word/document.xml is not well-formed XML");
    free(z);

    /* nested deeper than libxml2 accepts without XML_PARSE_HUGE */
    cq_strbuf deep = {0};
    cq_strbuf_puts(&deep, "<w:document " W_NS "><w:body><w:p>");
    for (int i = 0; i < 5000; i++) cq_strbuf_puts(&deep, "<w:r>");
    for (int i = 0; i < 5000; i++) cq_strbuf_puts(&deep, "</w:r>");
    cq_strbuf_puts(&deep, "</w:p></w:body></w:document>");
    part nested[] = {{"word/document.xml", deep.data, 0}};
    z = make_zip(tmp_path, nested, 1, &len);
    expect_failure(z, len, CQ_ERR_FORMAT, "word/document.xml is not well-formed XML");
    free(z);
    cq_strbuf_free(&deep);

    /* not well-formed; well-formed but not Word; Word without text; a bad optional part */
    part broken[] = {{"word/document.xml", "<w:document " W_NS "><w:body><w:p>", 0}};
    z = make_zip(tmp_path, broken, 1, &len);
    expect_failure(z, len, CQ_ERR_FORMAT, "word/document.xml is not well-formed XML (line 1:");
    free(z);
    part html[] = {{"word/document.xml", "<html><body>x</body></html>", 0}};
    z = make_zip(tmp_path, html, 1, &len);
    expect_failure(z, len, CQ_ERR_FORMAT, "not a Word document");
    free(z);
    char *empty_doc = document_xml("<w:p/><w:p><w:r><w:t> </w:t></w:r></w:p>");
    part empty[] = {{"word/document.xml", empty_doc, 0}};
    z = make_zip(tmp_path, empty, 1, &len);
    expect_failure(z, len, CQ_ERR_EMPTY, "the Word document contains no text");
    free(z);
    char *ok_doc = document_xml(PLAIN("第一条 内容。"));
    part bad_styles[] = {{"word/document.xml", ok_doc, 0}, {"word/styles.xml", "<w:styles", 0}};
    z = make_zip(tmp_path, bad_styles, 2, &len);
    expect_failure(z, len, CQ_ERR_FORMAT, "word/styles.xml is not well-formed XML");
    free(z);
    free(ok_doc);
    free(empty_doc);
}

/* ---- issue 29: memory outside the budget, linear lookups, cancel ---------------------------------------- */

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static cq_status read_docx_limited(const char *data, size_t len, const cq_reader_limits *lim, cq_doctext *d,
                                   cq_err *err) {
    cq_reader_input in = {.path = tmp_path, .data = data, .len = len, .limits = lim};
    return cq_reader_format_named("docx")->read(&in, d, err);
}

/* document.xml and styles.xml of ~60 MB of <a/> each (a 125 KB file): libxml2's DOM of them took 4.4 GB whatever
 * --doc-memory-mb said, and the file was ingested; the DOM now counts against the budget. */
static void test_dom_within_budget(void **state) {
    (void)state;
    const size_t n = 60u << 20;
    char *filler = malloc(n + 200);
    size_t k = (size_t)sprintf(filler, "<w:document " W_NS "><w:body><w:p><w:r><w:t>第一条 文字。</w:t></w:r></w:p>");
    while (k + 40 < n) memcpy(filler + k, "<a/>", 4), k += 4;
    k += (size_t)sprintf(filler + k, "</w:body></w:document>");
    char *styles = malloc(n + 200);
    size_t ks = (size_t)sprintf(styles, "<w:styles " W_NS ">");
    while (ks + 40 < n) memcpy(styles + ks, "<a/>", 4), ks += 4;
    ks += (size_t)sprintf(styles + ks, "</w:styles>");
    part parts[] = {{"word/document.xml", filler, k}, {"word/styles.xml", styles, ks}};
    size_t len;
    char *z = make_zip(tmp_path, parts, 2, &len);
    assert_true(len < (1u << 20));
    cq_reader_limits lim = {.max_bytes = 64u << 20};
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(read_docx_limited(z, len, &lim, &d, &err), CQ_ERR_TOO_LARGE);
    assert_non_null(strstr(err.msg, "document too large"));
    assert_null(d.text);
    free(z);
    free(filler);
    free(styles);
    /* a document of ordinary size reads within a small budget */
    char *g = good_docx(&len);
    lim.max_bytes = 8u << 20;
    assert_int_equal(read_docx_limited(g, len, &lim, &d, &err), CQ_OK);
    assert_string_equal(d.text, EXPECTED_TEXT);
    cq_doctext_free(&d);
    free(g);
}

/* 4,096 styles, each based on the one before, and 4,096 lists that name no list definition: every lookup was a
 * walk of the list (50k paragraphs 43 s; the nums' second resolution ran for minutes). */
static void test_lookups_linear(void **state) {
    (void)state;
    cq_strbuf st = {0}, num = {0}, body = {0};
    /* style i based on style i - 1, in chains of 17: every paragraph's style is looked up 16 times */
    cq_strbuf_puts(&st, "<w:styles " W_NS ">");
    for (int i = 0; i < 4096; i++)
        cq_strbuf_printf(&st, "<w:style w:type=\"paragraph\" w:styleId=\"S%d\"><w:name w:val=\"s%d\"/>"
                              "<w:basedOn w:val=\"S%d\"/></w:style>", i, i, i % 17 ? i - 1 : -1);
    cq_strbuf_puts(&st, "</w:styles>");
    char *styles = cq_strbuf_take(&st);
    cq_strbuf_puts(&num, "<w:numbering " W_NS ">");
    for (int i = 1; i <= 4096; i++) cq_strbuf_printf(&num, "<w:num w:numId=\"%d\"><w:abstractNumId w:val=\"%d\"/></w:num>",
                                                      i, 100000 + i);
    cq_strbuf_puts(&num, "</w:numbering>");
    for (int i = 0; i < 50000; i++)
        cq_strbuf_printf(&body, "<w:p><w:pPr><w:pStyle w:val=\"S%d\"/><w:numPr><w:numId w:val=\"%d\"/></w:numPr>"
                                "</w:pPr><w:r><w:t>第%d段</w:t></w:r></w:p>", 4096 - 1 - (i % 17), 1 + i % 4096, i);
    char *doc = document_xml(body.data);
    part parts[] = {{"word/document.xml", doc, 0}, {"word/styles.xml", styles, 0}, {"word/numbering.xml", num.data, 0}};
    size_t len;
    char *z = make_zip(tmp_path, parts, 3, &len);
    cq_doctext d;
    cq_err err = {0};
    double t0 = cpu_s();
    cq_status rc = read_docx(z, len, &d, &err);
    double took = cpu_s() - t0;
    if (rc) fail_msg("%s", err.msg);
    printf("50,000 paragraphs, 4,096 styles in chains, 4,096 dangling lists: %.2f s\n", took);
    assert_true(took < 5.0);
    assert_non_null(strstr(d.text, "第49999段"));
    cq_doctext_free(&d);
    /* cancel: a set flag stops the reading with CQ_ERR_CANCELLED */
    atomic_bool cancel = true;
    cq_reader_limits lim = {.cancel = &cancel};
    assert_int_equal(read_docx_limited(z, len, &lim, &d, &err), CQ_ERR_CANCELLED);
    assert_null(d.text);
    free(z);
    free(doc);
    free(styles);
    cq_strbuf_free(&num);
    cq_strbuf_free(&body);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_document),
        cmocka_unit_test(test_minimal_english),
        cmocka_unit_test(test_bad_documents),
        cmocka_unit_test(test_dom_within_budget),
        cmocka_unit_test(test_lookups_linear),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
