/* The batch ingest (cq_ingest_files: worker threads parse, one writer, many documents a transaction) against the
 * serial one (cq_ingest_file for each file, as the server ingests): the same corpus — ~150 generated laws and the
 * demo law, with a duplicate of an earlier group's file and of the file just before, a file that cannot be read,
 * one without text, a damaged PDF, names already taken (in the same group and in an earlier one) — into fresh
 * stores (serial, 1 worker, 4 workers), each with its own encoder of the same random weights. Every file's outcome
 * (status, message, counts) and every row (documents, clauses, pages, vectors, states, versions, the FTS content)
 * must be identical, and so must BM25 and dense top-10 lists with their scores; FAISS holds what SQLite holds.
 * Again with replace (the taken names replace their documents: one of them is still waiting for its vectors in
 * the group), and the FTS index itself must not depend on whether vectors and states are written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <dirent.h>
#include <sqlite3.h>

#include "app/ingest.h"
#include "core/sha256.h"
#include "core/strbuf.h"
#include "search/retrieve.h"
#include "store/store.h"
#include "search/vectors.h"
#include "test_ssm_util.h"

#define N_LAWS 150

static char root[] = "/tmp/cq_ingest_batch_XXXXXX";
static char *paths[N_LAWS + 16];
static size_t n_paths;

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    fclose(f);
}

static void add_path(const char *path) { paths[n_paths++] = strdup(path); }

/* law i: a title, chapters and articles whose words vary with i, so BM25 and the vectors differ between laws */
static char *law_text(int i) {
    static const char *const topics[] = {"劳动合同", "环境保护", "城市规划", "食品安全", "道路交通", "河道管理",
                                         "大气污染", "消费者权益", "安全生产", "档案管理", "水土保持"};
    const char *t = topics[i % 11], *u = topics[(i * 7 + 3) % 11];
    cq_strbuf b = {0};
    cq_strbuf_printf(&b, "# 某市%s条例（第%d号）\n\n第一章 总则\n\n", t, i);
    cq_strbuf_printf(&b, "第一条 为了加强%s，保障%s，根据有关法律，制定本条例。\n\n", t, u);
    cq_strbuf_printf(&b, "第二条 本条例适用于本市行政区域内的%s活动，第%d项规定除外。\n\n", t, i % 9 + 1);
    cq_strbuf_printf(&b, "第二章 管理\n\n第三条 县级以上人民政府负责%s工作，并协调%s。\n\n", u, t);
    for (int k = 0; k < i % 6; k++)
        cq_strbuf_printf(&b, "第%s条 违反本条例规定的，由有关部门责令改正，处%d元以上罚款。\n\n",
                         (const char *[]){"四", "五", "六", "七", "八", "九"}[k], (i + 1) * (k + 2) * 100);
    cq_strbuf_printf(&b, "第十条 本条例自%d年%d月%d日起施行。\n", 2000 + i % 20, i % 12 + 1, i % 27 + 1);
    return cq_strbuf_take(&b);
}

static int setup(void **state) {
    (void)state;
    assert_non_null(mkdtemp(root));
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/in", root);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/other", root);
    mkdir(dir, 0755);
    for (int i = 0; i < N_LAWS; i++) {
        char *text = law_text(i);
        snprintf(path, sizeof path, "%s/in/law%03d.md", root, i);
        write_file(path, text);
        free(text);
        add_path(path);
        if (i == 3) { /* the file just before, again (same group) */
            snprintf(path, sizeof path, "%s/in/law003 copy.md", root);
            text = law_text(3);
            write_file(path, text);
            free(text);
            add_path(path);
        }
        if (i == 6) { /* another file named law005, in the same group */
            snprintf(path, sizeof path, "%s/other/law005.md", root);
            write_file(path, "# 另一部同名条例\n\n第一条 同组同名而内容不同。\n\n第二条 本条例自公布之日起施行。\n");
            add_path(path);
        }
        if (i == 70) { /* a file of the first group, again; a file that cannot be read; one without text */
            snprintf(path, sizeof path, "%s/in/copy of law010.md", root);
            text = law_text(10);
            write_file(path, text);
            free(text);
            add_path(path);
            snprintf(path, sizeof path, "%s/in/missing.md", root);
            add_path(path);
            snprintf(path, sizeof path, "%s/in/blank.md", root);
            write_file(path, "   \n\n \n");
            add_path(path);
        }
        if (i == 100) { /* a damaged PDF; another file named law020 (refused without replace) */
            snprintf(path, sizeof path, "%s/in/damaged.pdf", root);
            write_file(path, "%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntruncated");
            add_path(path);
            snprintf(path, sizeof path, "%s/other/law020.md", root);
            write_file(path, "# 另一部条例\n\n第一条 同名而内容不同。\n");
            add_path(path);
        }
    }
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/data/demo/劳动合同法(2012-12-28).md", src ? src : ".");
    add_path(path);
    snprintf(dir, sizeof dir, "%s/models", root);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/models/ssm", root);
    cq_ssm_config c = {.vocab_size = CQ_SSM_VOCAB_SIZE, .d_model = 16, .n_layer = 2, .d_state = 4, .d_conv = 4,
                       .expand = 2, .dt_rank = 2, .d_embed = 32, .norm_eps = 1e-5f};
    assert_int_equal(ssm_test_write_model(dir, &c, 7, NULL, NULL), 0);
    assert_int_equal(ssm_test_write_doc_head(dir, &c, 64, 8), 0); /* document vectors too (issue 27) */
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (size_t i = 0; i < n_paths; i++) free(paths[i]);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

/* One ingest run: its store, dense retriever and every file's outcome as a line of text. */
typedef struct {
    char dir[600];
    cq_store *s;
    cq_dense *d;
    int64_t kb;
    bool replace;
    char *outcomes[N_LAWS + 16];
} run;

static void outcome_line(run *r, size_t i, cq_status rc, const cq_err *err, const cq_ingest_result *res) {
    char line[1024];
    if (rc)
        snprintf(line, sizeof line, "failed %s %s", cq_status_name(rc), err->msg);
    else
        snprintf(line, sizeof line, "%s id %lld clauses %d pages %d quality %.3f %s %s",
                 res->duplicate ? "duplicate" : "ready", (long long)res->doc_id, res->n_clauses, res->n_pages,
                 res->quality, res->quality_reason, res->format);
    assert_null(r->outcomes[i]);
    r->outcomes[i] = strdup(line);
}

static void on_done(void *user, size_t index, const char *path, cq_status rc, const cq_err *err,
                    const cq_ingest_result *res) {
    assert_string_equal(path, paths[index]);
    outcome_line(user, index, rc, err, res);
}

/* dense: with an encoder (and so vectors and states) */
static void open_run(run *r, const char *name, bool dense, bool replace) {
    memset(r, 0, sizeof *r);
    r->replace = replace;
    snprintf(r->dir, sizeof r->dir, "%s/%s", root, name);
    mkdir(r->dir, 0755);
    char db[700], models[600];
    snprintf(db, sizeof db, "%s/clauseqa.db", r->dir);
    snprintf(models, sizeof models, "%s/models/ssm", root);
    cq_err err = {0};
    if (cq_store_open(db, &r->s, &err)) fail_msg("%s", err.msg);
    if (cq_store_kb_ensure(r->s, "laws", &r->kb, &err)) fail_msg("%s", err.msg);
    if (dense && cq_dense_open(r->dir, models, &r->d, &err)) fail_msg("%s", err.msg);
}

static void ingest_serial(run *r) {
    cq_ingest_options o = {.dense = r->d, .ocr = CQ_OCR_OFF, .replace = r->replace};
    for (size_t i = 0; i < n_paths; i++) {
        cq_err err = {0};
        cq_ingest_result res;
        cq_status rc = cq_ingest_file(r->s, r->dir, r->kb, paths[i], &o, &res, &err);
        outcome_line(r, i, rc, &err, &res);
    }
}

static void ingest_batch(run *r, int workers) {
    cq_ingest_options o = {.dense = r->d, .ocr = CQ_OCR_OFF, .replace = r->replace};
    cq_ingest_batch_options bo = {.n_workers = workers, .done = on_done, .user = r};
    cq_err err = {0};
    if (cq_ingest_files(r->s, r->dir, r->kb, (const char *const *)paths, n_paths, &o, &bo, &err))
        fail_msg("%s", err.msg);
    for (size_t i = 0; i < n_paths; i++) assert_non_null(r->outcomes[i]);
}

/* The SHA-256 of every value the query returns, in order (blobs as bytes, NULL apart from ""). */
static void query_hash(cq_store *s, const char *sql, char hex[65], int64_t *rows) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s), sql, -1, &st, NULL)) fail_msg("%s: %s", sql, sqlite3_errmsg(cq_store_db(s)));
    cq_strbuf b = {0};
    *rows = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        (*rows)++;
        for (int c = 0; c < sqlite3_column_count(st); c++) {
            int type = sqlite3_column_type(st, c);
            const void *v = sqlite3_column_blob(st, c);
            int n = sqlite3_column_bytes(st, c);
            cq_strbuf_printf(&b, "|%d:%d:", type, n);
            if (v && n) cq_strbuf_append(&b, v, (size_t)n);
        }
        cq_strbuf_puts(&b, "\n");
    }
    sqlite3_finalize(st);
    char *text = cq_strbuf_take(&b);
    cq_sha256_hex(text ? text : "", text ? strlen(text) : 0, hex);
    free(text);
}

static int64_t count_rows(cq_store *s, const char *sql) {
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(cq_store_db(s), sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The kept originals (DATA/files), sorted, one a line. */
static char *originals(const run *r) {
    char dir[700];
    snprintf(dir, sizeof dir, "%s/files", r->dir);
    DIR *d = opendir(dir);
    assert_non_null(d);
    char *names[N_LAWS + 16];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            assert_true(n < N_LAWS + 16);
            names[n++] = strdup(e->d_name);
        }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    cq_strbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        cq_strbuf_printf(&b, "%s\n", names[i]);
        free(names[i]);
    }
    return cq_strbuf_take(&b);
}

static void hits_line(run *r, const char *question, int modes, cq_strbuf *out) {
    cq_err err = {0};
    cq_query q;
    cq_hits h;
    if (cq_query_parse(r->s, r->kb, question, &q, &err)) fail_msg("%s", err.msg);
    cq_retrieve_options o = {.modes = modes, .k = 10, .dense = r->d};
    if (cq_retrieve(r->s, &q, &o, &h, &err)) fail_msg("%s", err.msg);
    for (size_t i = 0; i < h.n; i++)
        cq_strbuf_printf(out, "%lld:%.9g:%d ", (long long)h.hits[i].clause_id, h.hits[i].score, h.hits[i].source);
    cq_strbuf_puts(out, "\n");
    cq_hits_free(&h);
    cq_query_free(&q);
}

/* FAISS holds exactly the vectors SQLite holds: none left of a replaced document, none missing. */
static void assert_faiss_follows_sqlite(run *r) {
    cq_vectors *v = NULL;
    cq_err err = {0};
    if (cq_dense_kb(r->d, r->s, r->kb, &v, &err)) fail_msg("%s", err.msg);
    assert_int_equal(cq_vectors_count(v), count_rows(r->s, "SELECT count(*) FROM clause_vectors"));
}

static void assert_same(run *a, run *b) {
    assert_faiss_follows_sqlite(a);
    assert_faiss_follows_sqlite(b);
    for (size_t i = 0; i < n_paths; i++)
        if (strcmp(a->outcomes[i], b->outcomes[i]))
            fail_msg("%s:\n  serial: %s\n  batch:  %s", paths[i], a->outcomes[i], b->outcomes[i]);
    static const char *const tables[] = {
        "SELECT id, kb_id, name, filename, format, sha256, size_bytes, title, n_pages, n_clauses, status, error, "
        "quality, quality_reason FROM documents ORDER BY id",
        "SELECT * FROM clauses ORDER BY id",
        "SELECT * FROM pages ORDER BY doc_id, page_no",
        "SELECT * FROM clause_vectors ORDER BY clause_id",
        "SELECT * FROM doc_vectors ORDER BY doc_id",
        "SELECT doc_id, kb_id, key, label, promulgated, effective, repealed, by_user FROM doc_versions ORDER BY doc_id",
        "SELECT * FROM fts_kb1_content ORDER BY id",
        "SELECT * FROM fts_kb1_docsize ORDER BY id",
    };
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++) {
        char ha[65], hb[65];
        int64_t na, nb;
        query_hash(a->s, tables[t], ha, &na);
        query_hash(b->s, tables[t], hb, &nb);
        assert_int_equal(na, nb);
        if (strcmp(ha, hb)) fail_msg("%s differs (%lld rows)", tables[t], (long long)na);
    }
    static const char *const questions[] = {"违反本条例规定的罚款", "环境保护条例第三条", "食品安全 县级以上人民政府",
                                            "用人单位解除劳动合同的经济补偿", "道路交通活动的适用范围"};
    cq_strbuf la = {0}, lb = {0};
    for (size_t q = 0; q < sizeof questions / sizeof *questions; q++) {
        hits_line(a, questions[q], CQ_RETRIEVE_BM25, &la);
        hits_line(b, questions[q], CQ_RETRIEVE_BM25, &lb);
        hits_line(a, questions[q], CQ_RETRIEVE_DENSE, &la);
        hits_line(b, questions[q], CQ_RETRIEVE_DENSE, &lb);
    }
    char *ta = cq_strbuf_take(&la), *tb = cq_strbuf_take(&lb);
    assert_string_equal(ta, tb);
    free(ta);
    free(tb);
    ta = originals(a); /* the same originals kept: none for a refused file */
    tb = originals(b);
    assert_string_equal(ta, tb);
    free(ta);
    free(tb);
}

static void close_run(run *r) {
    for (size_t i = 0; i < n_paths; i++) free(r->outcomes[i]);
    cq_dense_close(r->d);
    cq_store_close(r->s);
}

static void test_batch_same_as_serial(void **state) {
    (void)state;
    run serial, one, four, plain;
    open_run(&serial, "serial", true, false);
    ingest_serial(&serial);
    /* the corpus holds what it should: the failures and duplicates are where they were put */
    size_t ready = 0, dup = 0, failed = 0;
    for (size_t i = 0; i < n_paths; i++) {
        ready += !strncmp(serial.outcomes[i], "ready", 5);
        dup += !strncmp(serial.outcomes[i], "duplicate", 9);
        failed += !strncmp(serial.outcomes[i], "failed", 6);
    }
    assert_int_equal(ready, N_LAWS + 1);
    assert_int_equal(dup, 2);
    assert_int_equal(failed, 5); /* missing, blank, damaged, the two taken names */
    assert_int_equal(count_rows(serial.s, "SELECT count(*) FROM documents WHERE status = 'failed'"), 2);
    assert_true(count_rows(serial.s, "SELECT count(*) FROM clause_vectors") > 5 * N_LAWS);

    open_run(&one, "one", true, false);
    ingest_batch(&one, 1);
    assert_same(&serial, &one);
    /* the FTS index is the same without the encoder: vectors and states add no FTS segments (one a group) */
    open_run(&plain, "plain", false, false);
    ingest_batch(&plain, 1);
    static const char *const fts[] = {"SELECT * FROM fts_kb1_data ORDER BY id", "SELECT * FROM fts_kb1_idx ORDER BY 1, 2"};
    for (size_t t = 0; t < sizeof fts / sizeof *fts; t++) {
        char ha[65], hb[65];
        int64_t na, nb;
        query_hash(one.s, fts[t], ha, &na);
        query_hash(plain.s, fts[t], hb, &nb);
        assert_int_equal(na, nb);
        assert_string_equal(ha, hb);
    }
    assert_int_equal(count_rows(plain.s, "SELECT count(*) FROM doc_vectors"), 0);
    open_run(&four, "four", true, false);
    ingest_batch(&four, 4);
    assert_same(&serial, &four);

    /* Again into the same store: every file is a duplicate or fails as before, nothing is added. */
    int64_t docs = count_rows(four.s, "SELECT count(*) FROM documents");
    for (size_t i = 0; i < n_paths; i++) {
        free(four.outcomes[i]);
        four.outcomes[i] = NULL;
    }
    ingest_batch(&four, 4);
    assert_int_equal(count_rows(four.s, "SELECT count(*) FROM documents"), docs);
    for (size_t i = 0; i < n_paths; i++)
        assert_true(!strncmp(four.outcomes[i], "duplicate", 9) || !strncmp(four.outcomes[i], "failed", 6));
    close_run(&serial);
    close_run(&one);
    close_run(&four);
    close_run(&plain);
}

/* With replace, a taken name replaces its document: law005 by a file of the same group (written while law005's
 * vectors wait for the group's end), law020 by one of a later group. */
static void test_batch_replace_same_as_serial(void **state) {
    (void)state;
    run serial, four;
    open_run(&serial, "serial-replace", true, true);
    ingest_serial(&serial);
    size_t ready = 0, failed = 0;
    for (size_t i = 0; i < n_paths; i++) {
        ready += !strncmp(serial.outcomes[i], "ready", 5);
        failed += !strncmp(serial.outcomes[i], "failed", 6);
    }
    assert_int_equal(ready, N_LAWS + 3);
    assert_int_equal(failed, 3); /* missing, blank, damaged */
    assert_int_equal(count_rows(serial.s, "SELECT count(*) FROM documents WHERE name IN ('law005', 'law020')"), 2);
    assert_int_equal(count_rows(serial.s, "SELECT count(*) FROM clauses c JOIN documents d ON d.id = c.doc_id "
                                          "WHERE d.name = 'law005' AND c.text LIKE '%同组同名%'"), 1);
    open_run(&four, "four-replace", true, true);
    ingest_batch(&four, 4);
    assert_same(&serial, &four);
    close_run(&serial);
    close_run(&four);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_batch_same_as_serial),
                                       cmocka_unit_test(test_batch_replace_same_as_serial)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
