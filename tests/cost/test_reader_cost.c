/* The readers' cost grows at most linearly with their input (issue 29): every reader of the format table, on the
 * hostile shapes that once cost more (docs/RELIABILITY.md, "Round two: readers"), generated at 1, 2, 4 and 8 MB.
 * The fuzzers' inputs are capped at 256 KB and cannot find a cost that grows with size; this test can.
 *
 * Each input is read in a child process (this program again, fresh), as ingest reads it: the format's reader, then the structure parser,
 * within a 512 MB budget. (A DOCX shape's size is that of its XML; the zip is far smaller.) The child's CPU time and
 * peak memory come from wait4's rusage (CPU time, not wall time:
 * the machine is shared). Linear means here, with slack for noise: the 8 MB input costs at most 8 x 3 times the 1 MB
 * one (plus 0.3 s of CPU and 64 MB: the fixed part), and each doubling at most 3 times the one before (plus 0.25 s);
 * a quadratic cost is 64 x from 1 to 8 MB. A cost linear with a huge factor (a lookup that walks a capped list) is
 * caught by an absolute bound: 8 MB within MAX_CPU_8MB seconds of CPU. A shape's reading may fail (a page refused for its nesting is linear
 * too); what matters is what it costs. The whole run takes some 30 s of CPU.
 *
 *   usage: test_reader_cost [SHAPE-SUBSTRING]   (prints a table: shape, size, rc, CPU s, peak MB) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zip.h>

#include "core/strbuf.h"
#include "reader/reader.h"

#define MB (1u << 20)
#define MAX_CPU_8MB 10.0
#define N_SIZES 4
static const size_t sizes_mb[N_SIZES] = {1, 2, 4, 8};

static char tmp_dir[64];

/* ---- the shapes: each fills b with about `target` bytes ---- */

static void rep(cq_strbuf *b, size_t target, const char *piece) {
    size_t n = strlen(piece);
    while (b->len + n <= target) cq_strbuf_append(b, piece, n);
}

static void txt_paragraphs(cq_strbuf *b, size_t t) { rep(b, t, "第一条 为了保护劳动者的合法权益，制定本法。\nSection 2. The party shall pay.\n\n"); }
static void txt_one_line(cq_strbuf *b, size_t t) { rep(b, t, "word 第一条 "); } /* no line break at all */
static void txt_blank_lines(cq_strbuf *b, size_t t) { rep(b, t, "\n \n\t\n"); }
static void txt_gb_bad_bytes(cq_strbuf *b, size_t t) { /* GB18030 text with a stray 0xFF every 4 KB */
    static const char gb[] = "\xb5\xda\xd2\xbb\xcc\xf5 \xce\xaa\xc1\xcb\xb1\xa3\xbb\xa4\xa1\xa3\n"; /* 第一条 为了保护。 */
    while (b->len + 32 <= t) {
        cq_strbuf_puts(b, gb);
        if (b->len % 4096 < sizeof gb) cq_strbuf_append(b, "\xff", 1);
    }
}
static void md_headings_lists(cq_strbuf *b, size_t t) { rep(b, t, "# Part\n\n## 第一条 标题\n\n- item *em* `code`\n  - nested [link](x)\n\n"); }
static void md_open_comment(cq_strbuf *b, size_t t) {
    rep(b, t / 2, "text <!-- x\n");
    rep(b, t, "more text\n");
}
static void html_space_runs(cq_strbuf *b, size_t t) {
    cq_strbuf_puts(b, "<p>");
    rep(b, t, "word \n ");
}
static void html_div_stray_end(cq_strbuf *b, size_t t) { rep(b, t, "<div></i>"); }
static void html_paragraphs(cq_strbuf *b, size_t t) { rep(b, t, "<p class=a>第一条 文字 <b>粗</b> <a href=x>链接</a>。</p>\n"); }
static void html_tables(cq_strbuf *b, size_t t) {
    cq_strbuf_puts(b, "<table>");
    rep(b, t, "<tr><td>类别</td><td><p>永久</p></td><td>x</td></tr>");
}
static void html_gbk_bad_byte(cq_strbuf *b, size_t t) {
    cq_strbuf_puts(b, "<meta charset=gbk><p>");
    txt_gb_bad_bytes(b, t);
}
static void html_attributes(cq_strbuf *b, size_t t) { rep(b, t, "<p a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8>x</p>"); }

/* ---- Word: body XML, styles and numbering, zipped ---- */

#define W_NS "xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\""

static void docx_zip(cq_strbuf *b, const char *body, const char *styles, const char *numbering) {
    char path[128];
    snprintf(path, sizeof path, "%s/gen.docx", tmp_dir);
    int zerr = 0;
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    if (!z) abort();
    const char *names[] = {"word/document.xml", "word/styles.xml", "word/numbering.xml"};
    const char *parts[] = {body, styles, numbering};
    for (int i = 0; i < 3; i++) {
        if (!parts[i]) continue;
        zip_source_t *src = zip_source_buffer(z, parts[i], strlen(parts[i]), 0);
        if (!src || zip_file_add(z, names[i], src, 0) < 0) abort();
    }
    if (zip_close(z) != 0) abort();
    FILE *f = fopen(path, "rb");
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) cq_strbuf_append(b, buf, n);
    fclose(f);
}

/* t is the size of the XML (the zip is much smaller) */
static void docx_styled(cq_strbuf *b, size_t t) {
    cq_strbuf st = {0}, num = {0}, body = {0};
    cq_strbuf_puts(&st, "<w:styles " W_NS ">");
    for (int i = 0; i < 4096; i++)
        cq_strbuf_printf(&st, "<w:style w:type=\"paragraph\" w:styleId=\"S%d\"><w:name w:val=\"s%d\"/>"
                              "<w:basedOn w:val=\"S%d\"/></w:style>", i, i, i % 17 ? i - 1 : -1);
    cq_strbuf_puts(&st, "</w:styles>");
    cq_strbuf_puts(&num, "<w:numbering " W_NS ">");
    for (int i = 1; i <= 4096; i++)
        cq_strbuf_printf(&num, "<w:num w:numId=\"%d\"><w:abstractNumId w:val=\"%d\"/></w:num>", i, 100000 + i);
    cq_strbuf_puts(&num, "</w:numbering>");
    cq_strbuf_puts(&body, "<w:document " W_NS "><w:body>");
    for (int i = 0; body.len + 300 < t; i++)
        cq_strbuf_printf(&body, "<w:p><w:pPr><w:pStyle w:val=\"S%d\"/><w:numPr><w:numId w:val=\"%d\"/></w:numPr>"
                                "</w:pPr><w:r><w:t>第%d段 文字。</w:t></w:r></w:p>", 4095 - i % 17, 1 + i % 4096, i);
    cq_strbuf_puts(&body, "</w:body></w:document>");
    docx_zip(b, body.data, st.data, num.data);
    cq_strbuf_free(&st);
    cq_strbuf_free(&num);
    cq_strbuf_free(&body);
}

static void docx_empty_elements(cq_strbuf *b, size_t t) { /* the DOM of many small elements */
    cq_strbuf body = {0};
    cq_strbuf_puts(&body, "<w:document " W_NS "><w:body><w:p><w:r><w:t>第一条 文字。</w:t></w:r></w:p>");
    rep(&body, t - 32, "<a/>");
    cq_strbuf_puts(&body, "</w:body></w:document>");
    docx_zip(b, body.data, NULL, NULL);
    cq_strbuf_free(&body);
}

static void docx_table_rows(cq_strbuf *b, size_t t) {
    cq_strbuf body = {0};
    cq_strbuf_puts(&body, "<w:document " W_NS "><w:body><w:tbl>");
    rep(&body, t - 64, "<w:tr><w:tc><w:p><w:r><w:t>甲</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>乙</w:t></w:r>"
                       "</w:p></w:tc></w:tr>");
    cq_strbuf_puts(&body, "</w:tbl></w:body></w:document>");
    docx_zip(b, body.data, NULL, NULL);
    cq_strbuf_free(&body);
}

/* ---- PDF: pages written as the bytes run up to t ---- */

static void pdf_pages(cq_strbuf *b, size_t t, int lines_per_page, bool article) {
    /* objects: 1 catalog, 2 pages, 3 font, then page / content pairs; the page tree is written last, as object 2 */
    cq_strbuf body = {0};
    size_t *offs = NULL, n_offs = 0, cap = 0;
#define OBJ_AT()                                                                                                     \
    do {                                                                                                             \
        if (n_offs == cap) offs = realloc(offs, (cap = cap ? cap * 2 : 1024) * sizeof *offs);                        \
        offs[n_offs++] = body.len;                                                                                   \
    } while (0)
    cq_strbuf_puts(&body, "%PDF-1.4\n");
    OBJ_AT();
    cq_strbuf_puts(&body, "1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n");
    OBJ_AT(); /* object 2 comes at the end: its offset is fixed then */
    size_t obj2_slot = n_offs - 1;
    OBJ_AT();
    cq_strbuf_puts(&body, "3 0 obj\n<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>\nendobj\n");
    int pages = 0;
    cq_strbuf content = {0};
    while (body.len + 512 + 16 * (size_t)pages < t) {
        int obj = 4 + 2 * pages;
        OBJ_AT();
        cq_strbuf_printf(&body, "%d 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font "
                                "<< /F1 3 0 R >> >> /Contents %d 0 R >>\nendobj\n", obj, obj + 1);
        cq_strbuf_reset(&content);
        if (article) cq_strbuf_printf(&content, "BT /F1 14 Tf 72 740 Td (Article %d) Tj ET\n", pages + 1);
        for (int l = 0; l < lines_per_page; l++)
            cq_strbuf_printf(&content, "BT /F1 10 Tf 72 %d Td (This is line %d on page %d of the document.) Tj ET\n",
                             700 - 12 * l, l + 1, pages + 1);
        OBJ_AT();
        cq_strbuf_printf(&body, "%d 0 obj\n<< /Length %zu >>\nstream\n", obj + 1, content.len);
        cq_strbuf_append(&body, content.data, content.len);
        cq_strbuf_puts(&body, "\nendstream\nendobj\n");
        pages++;
    }
    offs[obj2_slot] = body.len;
    cq_strbuf_printf(&body, "2 0 obj\n<< /Type /Pages /Count %d /Kids [", pages);
    for (int k = 0; k < pages; k++) cq_strbuf_printf(&body, "%d 0 R ", 4 + 2 * k);
    cq_strbuf_puts(&body, "] >>\nendobj\n");
    size_t xref = body.len;
    cq_strbuf_printf(&body, "xref\n0 %zu\n0000000000 65535 f \n", n_offs + 1);
    for (size_t i = 0; i < n_offs; i++) cq_strbuf_printf(&body, "%010zu 00000 n \n", offs[i]);
    cq_strbuf_printf(&body, "trailer\n<< /Size %zu /Root 1 0 R >>\nstartxref\n%zu\n%%%%EOF\n", n_offs + 1, xref);
    cq_strbuf_append(b, body.data, body.len);
    cq_strbuf_free(&body);
    cq_strbuf_free(&content);
    free(offs);
#undef OBJ_AT
}

static void pdf_one_line_a_page(cq_strbuf *b, size_t t) { pdf_pages(b, t, 1, false); }
static void pdf_article_pages(cq_strbuf *b, size_t t) { pdf_pages(b, t, 3, true); }
static void pdf_full_pages(cq_strbuf *b, size_t t) { pdf_pages(b, t, 50, false); }

typedef struct {
    const char *name, *format;
    void (*gen)(cq_strbuf *b, size_t target);
} shape;

static const shape shapes[] = {
    {"txt-paragraphs", "txt", txt_paragraphs},
    {"txt-one-line", "txt", txt_one_line},
    {"txt-blank-lines", "txt", txt_blank_lines},
    {"txt-gb-bad-bytes", "txt", txt_gb_bad_bytes},
    {"md-headings-lists", "md", md_headings_lists},
    {"md-open-comment", "md", md_open_comment},
    {"html-space-runs", "html", html_space_runs},
    {"html-div-stray-end", "html", html_div_stray_end},
    {"html-paragraphs", "html", html_paragraphs},
    {"html-tables", "html", html_tables},
    {"html-gbk-bad-byte", "html", html_gbk_bad_byte},
    {"html-attributes", "html", html_attributes},
    {"docx-styled", "docx", docx_styled},
    {"docx-empty-elements", "docx", docx_empty_elements},
    {"docx-table-rows", "docx", docx_table_rows},
    {"pdf-one-line-a-page", "pdf", pdf_one_line_a_page},
    {"pdf-article-pages", "pdf", pdf_article_pages},
    {"pdf-full-pages", "pdf", pdf_full_pages},
};

/* ---- one measurement ---- */

typedef struct {
    int rc;          /* the reader's status (the structure parser's if the reader succeeded), -1: crashed */
    double cpu_s;
    double peak_mb;  /* the child's peak resident memory (its program, the input's bytes and the reading) */
} cost;

static const char *self_path;

/* The child: reads the file as ingest does and exits with the status (a fresh process, so that its peak resident
 * memory is its own: a forked child reuses its parent's freed heap and looks smaller than it is). */
static int child_main(const char *format, const char *path) {
    const cq_reader_format *f = cq_reader_format_named(format);
    FILE *fp = fopen(path, "rb");
    if (!f || !fp) return 100;
    cq_strbuf data = {0};
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, fp)) > 0) cq_strbuf_append(&data, buf, n);
    fclose(fp);
    cq_reader_limits lim = {.max_pages = CQ_READER_PAGES_CAP, .max_bytes = 512u * MB};
    cq_reader_input in = {.path = path, .data = data.data, .len = data.len, .limits = &lim, .ocr = CQ_OCR_OFF};
    cq_doctext d;
    cq_err err = {0};
    cq_status rc = f->read(&in, &d, &err);
    if (rc == CQ_OK) {
        cq_structure st;
        rc = cq_structure_parse(&d, &st, &err);
        if (rc == CQ_OK) cq_structure_free(&st);
        cq_doctext_free(&d);
    }
    cq_strbuf_free(&data);
    return rc;
}

static cost measure(const shape *s, const cq_strbuf *input) {
    const cq_reader_format *f = cq_reader_format_named(s->format);
    char path[128];
    snprintf(path, sizeof path, "%s/input.%s", tmp_dir, f->extensions[0]);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(input->data, 1, input->len, fp) != input->len || fclose(fp) != 0) abort();
    pid_t pid = fork();
    if (pid == 0) {
        execl(self_path, self_path, "--child", s->format, path, (char *)NULL);
        _exit(101);
    }
    int status = 0;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    cost c = {.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1};
    if (c.rc >= 100) c.rc = -1;
    c.cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
              ru.ru_stime.tv_usec / 1e6;
    c.peak_mb = (double)ru.ru_maxrss / 1024.0;
    return c;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--child")) return child_main(argv[2], argv[3]);
    self_path = "/proc/self/exe";
    static char exe[4096];
    ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (l > 0) {
        exe[l] = 0;
        self_path = exe;
    }
    const char *only = argc > 1 ? argv[1] : NULL;
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/cq_reader_cost_%d", (int)getpid());
    char cmd[128];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", tmp_dir);
    if (system(cmd) != 0) return 1;
    int failures = 0;
    printf("%-22s %6s %9s %4s %8s %8s\n", "shape", "MB", "file MB", "rc", "CPU s", "peak MB");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        if (only && !strstr(s->name, only)) continue;
        cost c[N_SIZES];
        for (int k = 0; k < N_SIZES; k++) {
            cq_strbuf input = {0};
            s->gen(&input, sizes_mb[k] * MB);
            if (input.failed) abort();
            c[k] = measure(s, &input);
            printf("%-22s %6zu %9.3f %4d %8.3f %8.1f\n", s->name, sizes_mb[k], (double)input.len / MB, c[k].rc,
                   c[k].cpu_s, c[k].peak_mb);
            fflush(stdout);
            cq_strbuf_free(&input);
            if (c[k].rc < 0) {
                printf("FAIL %s: the reader crashed at %zu MB\n", s->name, sizes_mb[k]);
                failures++;
            }
        }
        /* at most linear, with slack for noise */
        if (c[N_SIZES - 1].cpu_s > 3.0 * 8 * c[0].cpu_s + 0.3) {
            printf("FAIL %s: CPU time grows faster than the input: %.3f s at 1 MB, %.3f s at 8 MB\n", s->name,
                   c[0].cpu_s, c[N_SIZES - 1].cpu_s);
            failures++;
        }
        for (int k = 1; k < N_SIZES; k++)
            if (c[k].cpu_s > 3.0 * c[k - 1].cpu_s + 0.25) {
                printf("FAIL %s: CPU time %.3f s at %zu MB, %.3f s at %zu MB\n", s->name, c[k - 1].cpu_s,
                       sizes_mb[k - 1], c[k].cpu_s, sizes_mb[k]);
                failures++;
            }
        /* and not linear with a huge factor: 8 MB within 10 s of CPU (the slowest shape takes some 1.6 s here; 4,096
         * styles looked up by a walk of the list made docx-styled 18.9 s) */
        if (c[N_SIZES - 1].cpu_s > MAX_CPU_8MB) {
            printf("FAIL %s: %.3f s of CPU for 8 MB, more than %.0f s\n", s->name, c[N_SIZES - 1].cpu_s, MAX_CPU_8MB);
            failures++;
        }
        if (c[N_SIZES - 1].peak_mb > 3.0 * 8 * c[0].peak_mb + 64) {
            printf("FAIL %s: peak memory grows faster than the input: %.1f MB at 1 MB, %.1f MB at 8 MB\n", s->name,
                   c[0].peak_mb, c[N_SIZES - 1].peak_mb);
            failures++;
        }
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_dir);
    if (system(cmd) != 0) failures++;
    if (failures) printf("%d failure(s)\n", failures);
    else printf("every reader's cost grows at most linearly\n");
    return failures ? 1 : 0;
}
