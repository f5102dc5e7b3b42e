/* The conformance bodies of knowledge bases, documents, pages and clauses (store/store.h, written once in
 * store/documents.c; tests/store/conformance.h): the same on SQLite and PostgreSQL. */
#ifndef CQ_TESTS_STORE_DOCUMENTS_BODIES_H
#define CQ_TESTS_STORE_DOCUMENTS_BODIES_H

#include <stdbool.h>

#include "store/jobs.h"
#include "tests/store/conformance.h"

static void conf_documents_kbs(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t a, b, c;
    CONF_EXPECT(cq_store_kb_create(s, "laws", &a, &err), CQ_OK);
    CONF_EXPECT(cq_store_kb_create(s, "laws", &b, &err), CQ_ERR_EXISTS);
    assert_non_null(strstr(err.msg, "exists"));
    CONF_EXPECT(cq_store_kb_ensure(s, "laws", &b, &err), CQ_OK);
    assert_int_equal(a, b);
    CONF_EXPECT(cq_store_kb_create(s, "../etc", &b, &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_kb_ensure(s, "", &b, &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_kb_create(s, "法规库-2024", &b, &err), CQ_OK);
    CONF_EXPECT(cq_store_kb_ensure(s, "Zeta", &c, &err), CQ_OK);
    CONF_EXPECT(cq_store_kb_find(s, "nope", &b, &err), CQ_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "nope"));
    CONF_EXPECT(cq_store_kb_find(s, "法规库-2024", &b, &err), CQ_OK);
    cq_kb_info info;
    CONF_EXPECT(cq_store_kb_get(s, a, &info, &err), CQ_OK);
    assert_string_equal(info.name, "laws");
    assert_int_equal(info.id, a);
    assert_int_equal(info.n_documents, 0);
    assert_int_equal(info.n_clauses, 0);
    assert_true(info.created_at > 1700000000);
    CONF_EXPECT(cq_store_kb_get(s, a + b + c + 100, &info, &err), CQ_ERR_NOT_FOUND);
    /* Listed by name, bytewise (upper case before lower, CJK last), as SQLite orders text. */
    cq_kb_info *list;
    size_t n;
    CONF_EXPECT(cq_store_kb_list(s, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 3);
    assert_string_equal(list[0].name, "Zeta");
    assert_string_equal(list[1].name, "laws");
    assert_string_equal(list[2].name, "法规库-2024");
    free(list);
    /* Deleted, a KB's id is not used again. */
    CONF_EXPECT(cq_store_kb_delete(s, c, &err), CQ_OK);
    CONF_EXPECT(cq_store_kb_find(s, "Zeta", &b, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_kb_create(s, "Zeta", &b, &err), CQ_OK);
    assert_true(b > c);
}

static const char *const conf_law[][4] = {
    {NULL, NULL, "", "中华人民共和国公司法"},
    {"第一条", "1", "第一章 总则 > 第一条", "第一条 为了规范公司的组织和行为，保护公司、股东和债权人的合法权益，制定本法。"},
    {"第十二条", "12", "第一章 总则 > 第十二条", "第十二条 公司的经营范围由公司章程规定。\n\t可以修改 \\ 公司章程。"},
};

/* A document with law's clauses in one transaction, as app/ingest.c adds one; clause ids into ids. */
static int64_t conf_doc_add(cq_store *s, int64_t kb, const char *name, const char *sha, int64_t *ids) {
    cq_err err = {0};
    int64_t doc;
    CONF_EXPECT(cq_store_begin(s, &err), CQ_OK);
    CONF_EXPECT(cq_store_doc_create(s, kb, name, "公司法.md", "md", sha, 1234, &doc, &err), CQ_OK);
    cq_store_page page = {1, 595.5f, 842.25f, 300, 0.75, "low"};
    CONF_EXPECT(cq_store_page_add(s, doc, &page, &err), CQ_OK);
    page.page_no = 2;
    CONF_EXPECT(cq_store_page_add(s, doc, &page, &err), CQ_OK);
    for (size_t i = 0; i < 3; i++) {
        cq_store_box boxes[2] = {{10, 20, 300, 40, 1}, {10.5f, 60, 300, 80.25f, 2}};
        cq_store_clause c = {.ord = (int)i, .kind = conf_law[i][0] ? 1 : 3, .label = conf_law[i][0], .label_key = conf_law[i][1],
                             .path = conf_law[i][2], .text = conf_law[i][3], .page_first = 1, .page_last = (int)i % 2 + 1,
                             .start_off = (uint32_t)i * 100, .end_off = (uint32_t)i * 100 + 50, .boxes = boxes,
                             .n_boxes = i};
        CONF_EXPECT(cq_store_clause_add(s, kb, doc, "中华人民共和国公司法 公司法", &c, &ids[i], &err), CQ_OK);
        memset(boxes, 0, sizeof boxes); /* the store kept its own copy */
    }
    CONF_EXPECT(cq_store_doc_finish(s, doc, CQ_DOC_READY, NULL, "中华人民共和国公司法", 2, 3, 0.75, "low", &err), CQ_OK);
    CONF_EXPECT(cq_store_commit(s, &err), CQ_OK);
    return doc;
}

static void conf_documents_rows(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, kb2, ids[3], ids2[3];
    CONF_EXPECT(cq_store_kb_ensure(s, "t", &kb, &err), CQ_OK);
    CONF_EXPECT(cq_store_kb_ensure(s, "t2", &kb2, &err), CQ_OK);
    int64_t doc = conf_doc_add(s, kb, "公司法", "h1", ids);
    assert_true(ids[0] < ids[1] && ids[1] < ids[2]);

    /* The clause ids handed out at add are the rows' ids. */
    cq_clause_row row;
    CONF_EXPECT(cq_store_clause_get(s, ids[2], &row, &err), CQ_OK);
    assert_int_equal(row.id, ids[2]);
    assert_int_equal(row.doc_id, doc);
    assert_string_equal(row.doc_name, "公司法");
    assert_string_equal(row.doc_title, "中华人民共和国公司法");
    assert_string_equal(row.label, "第十二条");
    assert_string_equal(row.label_key, "12");
    assert_string_equal(row.text, conf_law[2][3]);
    assert_int_equal(row.page_first, 1);
    assert_int_equal(row.page_last, 1);
    assert_int_equal(row.n_boxes, 2);
    assert_true(row.boxes[1].x0 == 10.5f && row.boxes[1].y1 == 80.25f && row.boxes[1].page_no == 2);
    cq_clause_row_free(&row);
    CONF_EXPECT(cq_store_clause_get(s, ids[0], &row, &err), CQ_OK);
    assert_null(row.label);
    assert_null(row.boxes);
    assert_int_equal(row.kind, 3);
    cq_clause_row_free(&row);
    CONF_EXPECT(cq_store_clause_get(s, ids[2] + 1000, &row, &err), CQ_ERR_NOT_FOUND);
    /* A document's clauses in order, without its fields or boxes; none for a document that has none. */
    cq_clause_row *rows = NULL;
    size_t n_rows = 0;
    CONF_EXPECT(cq_store_doc_clauses(s, doc, &rows, &n_rows, &err), CQ_OK);
    assert_int_equal(n_rows, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(rows[i].id, ids[i]);
        assert_int_equal(rows[i].doc_id, doc);
        assert_int_equal(rows[i].kind, conf_law[i][0] ? 1 : 3);
        assert_string_equal(rows[i].text, conf_law[i][3]);
        assert_string_equal(rows[i].path, conf_law[i][2]);
        assert_int_equal(rows[i].page_last, (int)i % 2 + 1);
        assert_null(rows[i].doc_name);
        assert_null(rows[i].boxes);
        cq_clause_row_free(&rows[i]);
    }
    free(rows);
    rows = NULL;
    CONF_EXPECT(cq_store_doc_clauses(s, doc + 1000, &rows, &n_rows, &err), CQ_OK);
    assert_int_equal(n_rows, 0);
    assert_null(rows);

    /* By hash, by name, by id, listed: every column as written. */
    cq_doc_info d;
    CONF_EXPECT(cq_store_doc_by_hash(s, kb, "h1", &d, &err), CQ_OK);
    assert_int_equal(d.id, doc);
    assert_int_equal(d.kb_id, kb);
    assert_string_equal(d.name, "公司法");
    assert_string_equal(d.filename, "公司法.md");
    assert_string_equal(d.format, "md");
    assert_string_equal(d.sha256, "h1");
    assert_int_equal(d.size_bytes, 1234);
    assert_string_equal(d.title, "中华人民共和国公司法");
    assert_int_equal(d.n_pages, 2);
    assert_int_equal(d.n_clauses, 3);
    assert_int_equal(d.state, CQ_DOC_READY);
    assert_null(d.error);
    assert_true(d.quality == 0.75);
    assert_string_equal(d.quality_reason, "low");
    assert_true(d.created_at > 1700000000);
    cq_doc_info_free(&d);
    CONF_EXPECT(cq_store_doc_by_hash(s, kb2, "h1", &d, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_doc_get(s, doc, &d, &err), CQ_OK);
    assert_int_equal(d.id, doc);
    cq_doc_info_free(&d);
    CONF_EXPECT(cq_store_doc_get(s, doc + 1000, &d, &err), CQ_ERR_NOT_FOUND);
    /* The same content twice in a KB is refused; in another KB it is fine. */
    int64_t dup;
    CONF_EXPECT(cq_store_doc_create(s, kb, "copy", "copy.md", "md", "h1", 1, &dup, &err), CQ_ERR_EXISTS);
    int64_t doc2 = conf_doc_add(s, kb2, "公司法", "h1", ids2);
    assert_true(ids2[0] > ids[2]);

    /* By name: a ready one before a failed one, the newest first. */
    int64_t failed;
    CONF_EXPECT(cq_store_doc_create(s, kb, "公司法", "公司法.pdf", "pdf", "h2", 10, &failed, &err), CQ_OK);
    CONF_EXPECT(cq_store_doc_finish(s, failed, CQ_DOC_FAILED, "not a PDF", NULL, 0, 0, 0, NULL, &err), CQ_OK);
    CONF_EXPECT(cq_store_doc_by_name(s, kb, "公司法", &d, &err), CQ_OK);
    assert_int_equal(d.id, doc);
    cq_doc_info_free(&d);
    CONF_EXPECT(cq_store_doc_get(s, failed, &d, &err), CQ_OK);
    assert_int_equal(d.state, CQ_DOC_FAILED);
    assert_string_equal(d.error, "not a PDF");
    assert_null(d.title);
    assert_string_equal(d.quality_reason, "");
    cq_doc_info_free(&d);
    cq_doc_info *list;
    size_t n;
    CONF_EXPECT(cq_store_doc_list(s, kb, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(list[0].id, doc);
    assert_int_equal(list[1].id, failed);
    cq_doc_info_free_array(list, n);
    cq_kb_info info;
    CONF_EXPECT(cq_store_kb_get(s, kb, &info, &err), CQ_OK);
    assert_int_equal(info.n_documents, 2);
    assert_int_equal(info.n_clauses, 3);

    /* Pages, written with the document. */
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pages WHERE doc_id = %lld AND quality_reason = 'low'", (long long)doc);
    assert_int_equal(conf_count(s, sql), 2);
    cq_page_info *pages = NULL;
    size_t n_pages = 0;
    CONF_EXPECT(cq_store_page_list(s, doc, &pages, &n_pages, &err), CQ_OK);
    assert_int_equal(n_pages, 2);
    assert_int_equal(pages[1].page_no, 2);
    assert_true(pages[0].width == 595.5f && pages[0].height == 842.25f);
    assert_int_equal(pages[0].n_chars, 300);
    assert_true(pages[1].quality == 0.75);
    assert_string_equal(pages[1].quality_reason, "low");
    free(pages);

    /* Delete: its clauses and pages go; content in use as long as any document of any KB has it. */
    bool in_use = false;
    CONF_EXPECT(cq_store_doc_delete(s, doc, &err), CQ_OK);
    CONF_EXPECT(cq_store_doc_delete(s, doc, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_clause_get(s, ids[1], &row, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(conf_count(s, sql), 0);
    CONF_EXPECT(cq_store_content_in_use(s, "h1", &in_use, &err), CQ_OK);
    assert_true(in_use); /* kb2's copy */
    CONF_EXPECT(cq_store_doc_delete(s, doc2, &err), CQ_OK);
    CONF_EXPECT(cq_store_content_in_use(s, "h1", &in_use, &err), CQ_OK);
    assert_false(in_use);
    CONF_EXPECT(cq_store_content_in_use(s, "h2", &in_use, &err), CQ_OK);
    assert_true(in_use); /* a failed document keeps its original too */
    /* The KB with everything in it. */
    conf_doc_add(s, kb, "again", "h3", ids);
    CONF_EXPECT(cq_store_kb_delete(s, kb, &err), CQ_OK);
    CONF_EXPECT(cq_store_kb_delete(s, kb, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM clauses"), 0);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM documents"), 0);
}


/* Two connections (two nodes) ensure one KB: one row, one id; creating it again is EXISTS on either. */
static void conf_documents_ensure_two_connections(void **state) {
    cq_store *s = conf_store(state), *other = conf_reopen(state);
    cq_err err = {0};
    int64_t a = 0, b = 0, c = 0;
    CONF_EXPECT(cq_store_kb_ensure(s, "shared", &a, &err), CQ_OK);
    CONF_EXPECT(cq_store_kb_ensure(other, "shared", &b, &err), CQ_OK);
    assert_int_equal(a, b);
    CONF_EXPECT(cq_store_kb_create(other, "shared", &c, &err), CQ_ERR_EXISTS);
    /* a name taken, inside a transaction, leaves the transaction usable (no aborted transaction on PostgreSQL) */
    CONF_EXPECT(cq_store_begin(other, &err), CQ_OK);
    CONF_EXPECT(cq_store_kb_create(other, "shared", &c, &err), CQ_ERR_EXISTS);
    CONF_EXPECT(cq_store_kb_create(other, "second", &c, &err), CQ_OK);
    CONF_EXPECT(cq_store_commit(other, &err), CQ_OK);
    CONF_EXPECT(cq_store_kb_find(s, "second", &b, &err), CQ_OK);
    assert_int_equal(b, c);
    CONF_EXPECT(cq_store_kb_ensure(s, "../bad", &b, &err), CQ_ERR_INVALID);
    cq_store_close(other);
}

/* A KB or document deleted in a transaction rolled back is all there again: rows, clauses and keyword index. */
static void conf_documents_delete_rolled_back(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, ids[3];
    CONF_EXPECT(cq_store_kb_ensure(s, "t", &kb, &err), CQ_OK);
    int64_t doc = conf_doc_add(s, kb, "公司法", "h1", ids);
    CONF_EXPECT(cq_store_begin(s, &err), CQ_OK);
    CONF_EXPECT(cq_store_doc_delete(s, doc, &err), CQ_OK);
    CONF_EXPECT(cq_store_kb_delete(s, kb, &err), CQ_OK);
    cq_kb_info info;
    CONF_EXPECT(cq_store_kb_get(s, kb, &info, &err), CQ_ERR_NOT_FOUND); /* the transaction sees its deletes */
    cq_store_rollback(s);
    CONF_EXPECT(cq_store_kb_get(s, kb, &info, &err), CQ_OK);
    assert_int_equal(info.n_documents, 1);
    assert_int_equal(info.n_clauses, 3);
    cq_clause_row row;
    CONF_EXPECT(cq_store_clause_get(s, ids[1], &row, &err), CQ_OK);
    assert_string_equal(row.text, conf_law[1][3]);
    cq_clause_row_free(&row);
    /* the keyword index too: a second document's clauses go in after the first's, and both delete cleanly */
    int64_t ids2[3];
    int64_t doc2 = conf_doc_add(s, kb, "again", "h2", ids2);
    assert_true(ids2[0] > ids[2]);
    CONF_EXPECT(cq_store_doc_delete(s, doc, &err), CQ_OK);
    CONF_EXPECT(cq_store_doc_delete(s, doc2, &err), CQ_OK);
    CONF_EXPECT(cq_store_doc_delete(s, doc2, &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_kb_delete(s, kb, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM clauses"), 0);
}

/* Search inside a document (issue 30 item 4): its clauses whose text holds q, in order, ASCII letters in either case,
 * at most limit with "more"; another document's clauses never; none is no error. */
static void conf_clause_search(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, doc, other, ids[5], other_id;
    const char *texts[5] = {"第一条 Wages are paid monthly.", "第二条 加班工资按小时计。", "第三条 休息休假。",
                            "第四条 工资与WAGES。", "第五条 其他。"};
    CONF_EXPECT(cq_store_kb_ensure(s, "k", &kb, &err), CQ_OK);
    CONF_EXPECT(cq_store_begin(s, &err), CQ_OK);
    const char *sha_d = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
    const char *sha_e = "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd";
    CONF_EXPECT(cq_store_doc_create(s, kb, "d", "d.md", "md", sha_d, 5, &doc, &err), CQ_OK);
    for (int i = 0; i < 5; i++) {
        cq_store_clause c = {.ord = i, .kind = 1, .label = "条", .label_key = "k", .path = "p", .text = texts[i],
                             .page_first = i + 1, .page_last = i + 1};
        CONF_EXPECT(cq_store_clause_add(s, kb, doc, "d", &c, &ids[i], &err), CQ_OK);
    }
    CONF_EXPECT(cq_store_doc_finish(s, doc, CQ_DOC_READY, NULL, "d", 5, 5, 1, "", &err), CQ_OK);
    CONF_EXPECT(cq_store_doc_create(s, kb, "e", "e.md", "md", sha_e, 5, &other, &err), CQ_OK);
    cq_store_clause c = {.ord = 0, .kind = 1, .label = NULL, .path = "", .text = "工资 wages"};
    CONF_EXPECT(cq_store_clause_add(s, kb, other, "e", &c, &other_id, &err), CQ_OK);
    CONF_EXPECT(cq_store_doc_finish(s, other, CQ_DOC_READY, NULL, "e", 0, 1, 1, "", &err), CQ_OK);
    CONF_EXPECT(cq_store_commit(s, &err), CQ_OK);

    cq_clause_row *rows;
    size_t n;
    bool more;
    CONF_EXPECT(cq_store_clause_search(s, doc, "工资", 50, &rows, &n, &more, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_false(more);
    assert_true(rows[0].id == ids[1] && rows[1].id == ids[3]);
    assert_int_equal(rows[0].page_first, 2);
    assert_int_equal(rows[1].page_last, 4);
    assert_string_equal(rows[0].label, "条");
    assert_null(rows[0].text); /* the hits, not their text */
    for (size_t i = 0; i < n; i++) cq_clause_row_free(&rows[i]);
    free(rows);
    CONF_EXPECT(cq_store_clause_search(s, doc, "wAgEs", 50, &rows, &n, &more, &err), CQ_OK);
    assert_int_equal(n, 2); /* either case */
    assert_true(rows[0].id == ids[0] && rows[1].id == ids[3]);
    for (size_t i = 0; i < n; i++) cq_clause_row_free(&rows[i]);
    free(rows);
    CONF_EXPECT(cq_store_clause_search(s, doc, "条", 3, &rows, &n, &more, &err), CQ_OK);
    assert_int_equal(n, 3); /* the limit, in order, and more */
    assert_true(more);
    assert_true(rows[0].id == ids[0] && rows[2].id == ids[2]);
    for (size_t i = 0; i < n; i++) cq_clause_row_free(&rows[i]);
    free(rows);
    CONF_EXPECT(cq_store_clause_search(s, doc, "不在这里", 50, &rows, &n, &more, &err), CQ_OK);
    assert_int_equal(n, 0);
    assert_null(rows);
    assert_false(more);
    CONF_EXPECT(cq_store_clause_search(s, other + 1000, "工资", 50, &rows, &n, &more, &err), CQ_OK);
    assert_int_equal(n, 0);
}

#endif
