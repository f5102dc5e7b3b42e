/* index/store_pg: the PostgreSQL store against a throwaway cluster (tests/pg/cluster.sh sets CLAUSEQA_PG): schema
 * and migrations, documents and clauses in and out, and keyword retrieval that ranks and scores exactly as the
 * SQLite store's FTS5 bm25() does, on a hand-written fixture and on generated text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include "core/strbuf.h"
#include "store/bm25.h"
#include "store/store.h"
#include "pg_handle.h"
#include "pg_fixture.h"

/* ---- schema --------------------------------------------------------------------------------------------- */

static void test_schema(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    int version = 0;
    assert_int_equal(cq_pg_schema_version(pg, &version, &err), CQ_OK);
    assert_int_equal(version, CQ_PG_SCHEMA_VERSION);
    const char *tables[] = {"kbs", "documents", "clauses", "keyword_postings"};
    for (size_t i = 0; i < 4; i++) {
        char sql[96];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_tables WHERE tablename = '%s'", tables[i]);
        assert_int_equal(pg_count(pg, sql), 1);
    }
    /* Opening again migrates nothing; a schema newer than the program is refused with a reason. */
    const char *db = PQdb(cq_pg_conn(pg));
    char info[512];
    snprintf(info, sizeof info, "%s dbname=%s", conninfo, db);
    cq_pg *again = NULL;
    assert_int_equal(cq_pg_open(info, &again, &err), CQ_OK);
    cq_pg_close(again);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM clauseqa_schema"), 1);
    pg_exec(pg, "UPDATE clauseqa_schema SET version = 99");
    assert_int_equal(cq_pg_open(info, &again, &err), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "newer"));
    char restore[64];
    snprintf(restore, sizeof restore, "UPDATE clauseqa_schema SET version = %d", CQ_PG_SCHEMA_VERSION);
    pg_exec(pg, restore);
}

static void test_bad_server(void **state) {
    (void)state;
    cq_pg *pg = NULL;
    cq_err err = {0};
    assert_int_equal(cq_pg_open("host=/nonexistent port=1 connect_timeout=2", &pg, &err), CQ_ERR_DB);
    assert_null(pg);
    assert_non_null(strstr(err.msg, "cannot connect"));
}

/* ---- documents and clauses ---------------------------------------------------------------------------------- */

static void test_document_roundtrip(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    int64_t kb = 0, kb2 = 0, doc = 0, other = 0;
    assert_int_equal(cq_store_kb_ensure(pg_store(pg), "劳动", &kb, &err), CQ_OK);
    assert_int_equal(cq_store_kb_ensure(pg_store(pg), "劳动", &kb2, &err), CQ_OK);
    assert_int_equal(kb, kb2);
    assert_int_equal(cq_store_kb_ensure(pg_store(pg), "../x", &kb2, &err), CQ_ERR_INVALID);
    cq_store *s = pg_store(pg);
    assert_int_equal(cq_store_doc_create(s, kb, "劳动法", "劳动法.md", "md", "aa", 10, &doc, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(s, kb, "copy", "copy.md", "md", "aa", 10, &other, &err), CQ_ERR_EXISTS);

    cq_store_box boxes[2] = {{1, 2, 3, 4, 1}, {5, 6, 7, 8, 2}};
    cq_store_clause c[3] = {
        {.ord = 0, .kind = 1, .label = "第一条", .label_key = "1", .path = "第一章 > 第一条",
         .text = "为了保护劳动者的合法权益，制定本法。", .page_first = 1, .page_last = 2, .boxes = boxes, .n_boxes = 2},
        {.ord = 1, .kind = 1, .label = "第二条", .label_key = "2", .path = "第一章 > 第二条",
         .text = "tab\there, newline\nand back\\slash: COPY escapes them", .page_first = 2, .page_last = 2},
        {.ord = 2, .kind = 3, .label = NULL, .label_key = NULL, .path = NULL, .text = "附则"},
    };
    int64_t ids[3];
    assert_int_equal(cq_pg_doc_add_clauses(pg, doc, "劳动法 劳动法", c, 3, ids, &err), CQ_OK);
    assert_true(ids[0] < ids[1] && ids[1] < ids[2]);
    assert_int_equal(cq_pg_doc_add_clauses(pg, doc, "劳动法", c, 1, NULL, &err), CQ_ERR_EXISTS);
    assert_int_equal(cq_pg_doc_add_clauses(pg, 999999, "x", c, 1, NULL, &err), CQ_ERR_NOT_FOUND);

    cq_clause_row row;
    assert_int_equal(cq_store_clause_get(pg_store(pg), ids[0], &row, &err), CQ_OK);
    assert_int_equal(row.doc_id, doc);
    assert_string_equal(row.doc_name, "劳动法");
    assert_string_equal(row.label, "第一条");
    assert_string_equal(row.label_key, "1");
    assert_string_equal(row.path, "第一章 > 第一条");
    assert_string_equal(row.text, c[0].text);
    assert_int_equal(row.page_first, 1);
    assert_int_equal(row.page_last, 2);
    assert_int_equal(row.n_boxes, 2);
    assert_memory_equal(row.boxes, boxes, sizeof boxes);
    cq_clause_row_free(&row);
    assert_int_equal(cq_store_clause_get(pg_store(pg), ids[1], &row, &err), CQ_OK);
    assert_string_equal(row.text, c[1].text);
    assert_null(row.boxes);
    cq_clause_row_free(&row);
    assert_int_equal(cq_store_clause_get(pg_store(pg), ids[2], &row, &err), CQ_OK);
    assert_null(row.label);
    assert_string_equal(row.path, "");
    cq_clause_row_free(&row);

    /* The index: one row per token of the document; its statistics on the document's row. */
    assert_true(pg_count(pg, "SELECT count(*) FROM keyword_postings") > 20);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM keyword_postings WHERE token = 'copy'"), 1);
    assert_int_equal(pg_count(pg, "SELECT sum(keyword_clauses) FROM documents"), 3);
    const char *terms[] = {"劳动者"};
    cq_keyword_hit *hits = NULL;
    size_t n = 0;
    assert_int_equal(cq_pg_bm25(pg, kb, terms, 1, NULL, 0, 10, &hits, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(hits[0].clause_id, ids[0]);
    assert_int_equal(hits[0].doc_id, doc);
    free(hits);

    /* Deleting the document takes its clauses and postings with it. */
    assert_int_equal(cq_store_doc_delete(pg_store(pg), doc, &err), CQ_OK);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM clauses"), 0);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM keyword_postings"), 0);
    assert_int_equal(cq_store_clause_get(pg_store(pg), ids[0], &row, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_doc_delete(pg_store(pg), doc, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_pg_bm25(pg, kb, terms, 1, NULL, 0, 10, &hits, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    free(hits);
    /* A KB's deletion takes its documents' postings too (through the documents' deletion: migration 5's trigger). */
    assert_int_equal(cq_store_doc_create(pg_store(pg), kb, "again", "again.md", "md", "bb", 10, &doc, &err), CQ_OK);
    assert_int_equal(cq_pg_doc_add_clauses(pg, doc, "again", c, 3, ids, &err), CQ_OK);
    assert_true(pg_count(pg, "SELECT count(*) FROM keyword_postings") > 20);
    assert_int_equal(cq_store_kb_delete(pg_store(pg), kb, &err), CQ_OK);
    assert_int_equal(pg_count(pg, "SELECT count(*) FROM keyword_postings"), 0);
    assert_int_equal(cq_store_kb_delete(pg_store(pg), kb, &err), CQ_ERR_NOT_FOUND);
}

/* ---- BM25 parity with SQLite FTS5 ----------------------------------------------------------------------------- */

/* The same documents in a SQLite store and the PostgreSQL one; clause i has SQLite id sq[i] and PostgreSQL id pq[i]. */
typedef struct {
    cq_pg *pg;
    cq_store *sq;
    char path[128];
    int64_t kb_pg, kb_sq;
    int64_t sq_ids[512], pg_ids[512], sq_docs[16], pg_docs[16];
    size_t n, n_docs;
} twin;

static void twin_open(twin *t, cq_pg *pg) {
    memset(t, 0, sizeof *t);
    t->pg = pg;
    cq_err err = {0};
    snprintf(t->path, sizeof t->path, "/tmp/cq_test_store_pg_%d.db", (int)getpid());
    unlink(t->path);
    assert_int_equal(cq_store_open(t->path, &t->sq, &err), CQ_OK);
    assert_int_equal(cq_store_kb_ensure(t->sq, "kb", &t->kb_sq, &err), CQ_OK);
    assert_int_equal(cq_store_kb_ensure(pg_store(pg), "kb", &t->kb_pg, &err), CQ_OK);
}

static void twin_close(twin *t) {
    cq_store_close(t->sq);
    char p[160];
    unlink(t->path);
    snprintf(p, sizeof p, "%s-wal", t->path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", t->path);
    unlink(p);
}

/* Adds a document whose clauses are (path, text) pairs to both stores. */
static void twin_add(twin *t, const char *name, const char *label, const char *const (*clauses)[2], size_t n) {
    cq_err err = {0};
    char sha[32];
    snprintf(sha, sizeof sha, "sha-%zu", t->n_docs);
    int64_t sq_doc, pg_doc;
    cq_store_clause *c = calloc(n, sizeof *c);
    assert_non_null(c);
    for (size_t i = 0; i < n; i++) c[i] = (cq_store_clause){.ord = (int)i, .kind = 1, .path = clauses[i][0], .text = clauses[i][1]};
    assert_int_equal(cq_store_begin(t->sq, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(t->sq, t->kb_sq, name, name, "md", sha, 1, &sq_doc, &err), CQ_OK);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(cq_store_clause_add(t->sq, t->kb_sq, sq_doc, label, &c[i], &t->sq_ids[t->n + i], &err), CQ_OK);
    assert_int_equal(cq_store_commit(t->sq, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(pg_store(t->pg), t->kb_pg, name, name, "md", sha, 1, &pg_doc, &err), CQ_OK);
    assert_int_equal(cq_pg_doc_add_clauses(t->pg, pg_doc, label, c, n, &t->pg_ids[t->n], &err), CQ_OK);
    t->sq_docs[t->n_docs] = sq_doc;
    t->pg_docs[t->n_docs++] = pg_doc;
    t->n += n;
    free(c);
}

static int64_t to_sqlite_id(const twin *t, int64_t pg_id) {
    for (size_t i = 0; i < t->n; i++)
        if (t->pg_ids[i] == pg_id) return t->sq_ids[i];
    return -1;
}

typedef struct {
    int64_t id;
    double score;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

/* What search/retrieve.c asks FTS5: the terms quoted and OR-ed, bm25() with the column weights; every matching row,
 * best first, ties by id. Restricted to SQLite document doc when doc > 0. */
static size_t sqlite_bm25(twin *t, const char *const *terms, size_t n_terms, int64_t doc, ranked *out, size_t cap) {
    cq_strbuf q = {0};
    for (size_t i = 0; i < n_terms; i++) {
        if (i) cq_strbuf_puts(&q, " OR ");
        cq_strbuf_puts(&q, "\"");
        for (const char *p = terms[i]; *p; p++) cq_strbuf_puts(&q, *p == '"' ? "\"\"" : (char[]){*p, 0});
        cq_strbuf_puts(&q, "\"");
    }
    char sql[400];
    snprintf(sql, sizeof sql,
             "SELECT rowid, bm25(" CQ_FTS_TABLE_FMT ", %g, %g, %g) FROM " CQ_FTS_TABLE_FMT " WHERE " CQ_FTS_TABLE_FMT
             " MATCH ?1 %s",
             (long long)t->kb_sq, CQ_BM25_W_TITLE, CQ_BM25_W_PATH, CQ_BM25_W_BODY, (long long)t->kb_sq,
             (long long)t->kb_sq, doc > 0 ? "AND rowid IN (SELECT id FROM clauses WHERE doc_id = ?2)" : "");
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(cq_store_db(t->sq), sql, -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_text(st, 1, q.data, -1, SQLITE_TRANSIENT);
    if (doc > 0) sqlite3_bind_int64(st, 2, doc);
    size_t n = 0;
    while (sqlite3_step(st) == SQLITE_ROW && n < cap) {
        out[n].id = sqlite3_column_int64(st, 0);
        out[n++].score = -sqlite3_column_double(st, 1);
    }
    sqlite3_finalize(st);
    cq_strbuf_free(&q);
    qsort(out, n, sizeof *out, cmp_ranked);
    return n;
}

/* Both stores rank the same clauses in the same order with the same scores (to the last bit); returns the hits. */
static size_t expect_parity(twin *t, const char *const *terms, size_t n_terms, size_t doc_index) {
    ranked want[512];
    const int64_t sq_doc = doc_index ? t->sq_docs[doc_index - 1] : 0;
    size_t n_want = sqlite_bm25(t, terms, n_terms, sq_doc, want, 512);
    cq_keyword_hit *got = NULL;
    size_t n_got = 0;
    cq_err err = {0};
    const int64_t *docs = doc_index ? &t->pg_docs[doc_index - 1] : NULL;
    assert_int_equal(cq_pg_bm25(t->pg, t->kb_pg, terms, n_terms, docs, doc_index ? 1 : 0, 512, &got, &n_got, &err),
                     CQ_OK);
    if (n_got != n_want) fail_msg("query '%s'...: %zu hits on PostgreSQL, %zu on SQLite", terms[0], n_got, n_want);
    for (size_t i = 0; i < n_got; i++) {
        if (to_sqlite_id(t, got[i].clause_id) != want[i].id || got[i].score != want[i].score)
            fail_msg("query '%s'...: hit %zu: PostgreSQL clause %lld (SQLite %lld) %.17g, SQLite clause %lld %.17g",
                     terms[0], i, (long long)got[i].clause_id, (long long)to_sqlite_id(t, got[i].clause_id),
                     got[i].score, (long long)want[i].id, want[i].score);
    }
    free(got);
    if (!doc_index && t->n_docs) {
        /* every document's best at once (the rows read once): what one call per document gives */
        enum { PER_DOC = 8 };
        cq_keyword_hit *each = NULL;
        size_t n_each = 0, k = 0;
        assert_int_equal(cq_pg_bm25(t->pg, t->kb_pg, terms, n_terms, t->pg_docs, t->n_docs, PER_DOC, &each, &n_each,
                                    &err),
                         CQ_OK);
        for (size_t d = 0; d < t->n_docs; d++) {
            cq_keyword_hit *one = NULL;
            size_t n_one = 0;
            assert_int_equal(cq_pg_bm25(t->pg, t->kb_pg, terms, n_terms, &t->pg_docs[d], 1, PER_DOC, &one, &n_one, &err),
                             CQ_OK);
            for (size_t i = 0; i < n_one; i++, k++) {
                assert_true(k < n_each);
                assert_int_equal(each[k].clause_id, one[i].clause_id);
                assert_true(each[k].score == one[i].score);
            }
            free(one);
        }
        assert_int_equal(k, n_each);
        free(each);
    }
    return n_got;
}

static void test_bm25_parity_fixture(void **state) {
    twin t;
    twin_open(&t, *state);
    static const char *const labor[][2] = {
        {"第一章 总则 > 第一条", "为了保护劳动者的合法权益，调整劳动关系，建立和维护适应社会主义市场经济的劳动制度，制定本法。"},
        {"第四章 工作时间 > 第四十四条", "有下列情形之一的，用人单位应当按照下列标准支付高于劳动者正常工作时间工资的工资报酬：安排劳动者延长工作时间的，支付不低于工资的百分之一百五十的工资报酬。"},
        {"第四章 工作时间 > 第四十一条", "用人单位由于生产经营需要，经与工会和劳动者协商后可以延长工作时间，一般每日不得超过一小时。加班费按规定支付。"},
        {"第五章 工资 > 第五十条", "工资应当以货币形式按月支付给劳动者本人。不得克扣或者无故拖欠劳动者的工资。"},
        {"附则 > 第一百零七条", "本法自1995年1月1日起施行。人民币100元以下的罚款由劳动行政部门决定。"},
    };
    static const char *const contract[][2] = {
        {"Article 7 > Section 7.2", "Either party may terminate this Agreement upon thirty (30) days' written notice."},
        {"Article 7 > Section 7.3", "The Employer's obligations survive termination; the non-compete clause applies for 2 years."},
        {"Article 1", "Definitions. \"Agreement\" means this agreement, including Section 7.2 and 7.3 termination terms."},
        {"Article 9", "加班费 overtime pay is paid at 150% of the hourly wage (加班费按小时计算)."},
    };
    static const char *const local[][2] = {
        {"第一条", "上海市劳动合同条例：劳动者加班的，用人单位应当支付加班费。加班费加班费加班费。"},
        {"第二条", "哈哈哈哈 repeated repeated repeated tokens and 工资工资 twice."},
        {"", ""},
    };
    twin_add(&t, "劳动法", "劳动法 中华人民共和国劳动法", labor, 5);
    twin_add(&t, "contract", "Services Agreement contract", contract, 4);
    twin_add(&t, "上海市劳动合同条例", "上海市劳动合同条例", local, 3);

    static const char *const q1[] = {"加班费"};
    static const char *const q2[] = {"劳动者", "工资", "延长", "工作时间"};
    static const char *const q3[] = {"terminate", "7.2", "employer", "non-compete"};
    static const char *const q4[] = {"劳动法", "第四十四条"};
    static const char *const q5[] = {"税"};
    static const char *const q6[] = {"人民币100元", "加班费100"};
    static const char *const q7[] = {"哈哈哈", "repeated tokens", "工资工资"};
    static const char *const q8[] = {"agreement", "劳", "？？", "section"};
    static const char *const q9[] = {"nothing-matches", "zzzz"};
    assert_int_equal(expect_parity(&t, q1, 1, 0), 3);  /* 加班费 is the phrase 加班 班费: not in 加班的 */
    assert_int_equal(expect_parity(&t, q2, 4, 0), 6);
    assert_int_equal(expect_parity(&t, q3, 4, 0), 3);  /* "7.2" is one token: 7.3 does not match */
    assert_int_equal(expect_parity(&t, q4, 2, 0), 5);  /* the title column holds 劳动法 */
    assert_int_equal(expect_parity(&t, q5, 1, 0), 0);
    assert_int_equal(expect_parity(&t, q6, 2, 0), 1);  /* a phrase across a CJK run's end: 人民币100元 */
    assert_int_equal(expect_parity(&t, q7, 3, 0), 1);
    assert_true(expect_parity(&t, q8, 4, 0) >= 8);     /* "？？" has no token: dropped */
    assert_int_equal(expect_parity(&t, q9, 2, 0), 0);
    /* restricted to one document: the statistics stay the KB's */
    expect_parity(&t, q2, 4, 1);
    expect_parity(&t, q1, 1, 3);
    expect_parity(&t, q3, 4, 2);

    /* after a deletion, the KB's statistics and document frequencies follow */
    cq_err err = {0};
    assert_int_equal(cq_store_doc_delete(t.sq, t.sq_docs[0], &err), CQ_OK);
    assert_int_equal(cq_store_doc_delete(pg_store(t.pg), t.pg_docs[0], &err), CQ_OK);
    expect_parity(&t, q1, 1, 0);
    expect_parity(&t, q2, 4, 0);
    expect_parity(&t, q8, 4, 0);
    twin_close(&t);
}

static unsigned next_random(unsigned *seed) {
    *seed = *seed * 1103515245u + 12345u;
    return (*seed >> 16) & 0x7fff;
}

/* Generated clauses over a small vocabulary (so terms repeat, phrases recur and scores tie), random queries. */
static void test_bm25_parity_generated(void **state) {
    twin t;
    twin_open(&t, *state);
    static const char *const words[] = {"劳动", "合同", "工资", "加班", "用人单位", "劳动者", "应当", "支付", "规定",
                                        "termination", "notice", "party", "7.2", "days", "的", "和", "，", "。", " "};
    const size_t n_words = sizeof words / sizeof words[0];
    unsigned seed = 12345;
#define RAND() next_random(&seed)
    static char text[8][40][400];
    static const char *clauses[8][40][2];
    for (size_t d = 0; d < 8; d++) {
        size_t n = 5 + RAND() % 35;
        for (size_t i = 0; i < n; i++) {
            cq_strbuf b = {0};
            size_t len = 1 + RAND() % 30;
            for (size_t k = 0; k < len; k++) cq_strbuf_puts(&b, words[RAND() % n_words]);
            snprintf(text[d][i], sizeof text[d][i], "%s", b.data);
            cq_strbuf_free(&b);
            clauses[d][i][0] = i % 3 ? "第一章 劳动合同" : "";
            clauses[d][i][1] = text[d][i];
        }
        char name[16];
        snprintf(name, sizeof name, "doc%zu", d);
        twin_add(&t, name, d % 2 ? "劳动合同法" : "contract law", clauses[d], n);
    }
    size_t hits = 0;
    for (int q = 0; q < 60; q++) {
        const char *terms[4];
        char buf[4][64];
        size_t n_terms = 1 + RAND() % 4;
        for (size_t i = 0; i < n_terms; i++) {
            /* one word, or two run together (a phrase across a word boundary) */
            const char *first = words[RAND() % 14];
            const char *second = RAND() % 2 ? words[RAND() % 14] : "";
            snprintf(buf[i], sizeof buf[i], "%s%s", first, second);
            terms[i] = buf[i];
        }
        hits += expect_parity(&t, terms, n_terms, q % 5 == 0 ? 1 + (size_t)q % 8 : 0);
    }
#undef RAND
    assert_true(hits > 500);
    twin_close(&t);
}

int main(void) {
    PG_FIXTURE_REQUIRE_SERVER();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_schema, pg_setup, pg_teardown),
        cmocka_unit_test(test_bad_server),
        cmocka_unit_test_setup_teardown(test_document_roundtrip, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_bm25_parity_fixture, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_bm25_parity_generated, pg_setup, pg_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
