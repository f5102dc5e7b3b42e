/* The conformance bodies of the store's keyword index (store/store.h cq_store_keyword_bm25: SQLite's FTS5 tables or
 * PostgreSQL's postings, store/store.c's table of functions; tests/store/conformance.h): the same hits, in the same
 * order, on both stores, over a KB or document by document; a deleted document's clauses and a rolled-back
 * document's are never found. */
#ifndef CQ_TESTS_STORE_KEYWORD_BODIES_H
#define CQ_TESTS_STORE_KEYWORD_BODIES_H

#include <stdbool.h>

#include "store/bm25.h"
#include "tests/store/conformance.h"

/* A ready document of KB kb whose clauses are texts[0..n); their ids into ids. */
static int64_t conf_keyword_doc(cq_store *s, int64_t kb, const char *name, const char *const *texts, size_t n,
                                int64_t *ids) {
    cq_err err = {0};
    int64_t doc;
    char sha[65];
    snprintf(sha, sizeof sha, "%064zu", strlen(name) * 1000 + n);
    CONF_EXPECT(cq_store_begin(s, &err), CQ_OK);
    CONF_EXPECT(cq_store_doc_create(s, kb, name, "x.md", "md", sha, 10, &doc, &err), CQ_OK);
    for (size_t i = 0; i < n; i++) {
        cq_store_clause c = {.ord = (int)i, .kind = 1, .path = "", .text = texts[i], .page_first = 1, .page_last = 1};
        CONF_EXPECT(cq_store_clause_add(s, kb, doc, name, &c, &ids[i], &err), CQ_OK);
    }
    CONF_EXPECT(cq_store_doc_finish(s, doc, CQ_DOC_READY, NULL, name, 1, (int)n, 1, "", &err), CQ_OK);
    CONF_EXPECT(cq_store_commit(s, &err), CQ_OK);
    return doc;
}

static void conf_keyword_bm25(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, other_kb;
    CONF_EXPECT(cq_store_kb_create(s, "kw", &kb, &err), CQ_OK);
    CONF_EXPECT(cq_store_kb_create(s, "kw2", &other_kb, &err), CQ_OK);
    static const char *const a_texts[] = {"第一条 工资按月支付，加班工资另计。", "第二条 休假由单位安排。",
                                          "第三条 工资不得低于最低标准。"};
    static const char *const b_texts[] = {"第一条 加班应当协商。", "第二条 保险依法缴纳。"};
    static const char *const other_texts[] = {"第一条 工资加班工资。"};
    int64_t a_ids[3], b_ids[2], other_ids[1];
    int64_t a = conf_keyword_doc(s, kb, "a-law", a_texts, 3, a_ids);
    int64_t b = conf_keyword_doc(s, kb, "b-law", b_texts, 2, b_ids);
    conf_keyword_doc(s, other_kb, "c-law", other_texts, 1, other_ids);

    const char *terms[] = {"工资", "加班"};
    cq_bm25_hit found[8];
    int64_t doc_of[8];
    size_t n = 0;
    /* over the KB: both terms' clauses, best first (a's first clause holds both, 工资 twice), none of kw2's */
    CONF_EXPECT(cq_store_keyword_bm25(s, kb, terms, 2, NULL, 0, 8, found, doc_of, &n, &err), CQ_OK);
    assert_int_equal(n, 3);
    assert_int_equal(found[0].id, a_ids[0]);
    assert_int_equal(doc_of[0], a);
    bool saw_a2 = false, saw_b0 = false;
    for (size_t i = 0; i < n; i++) {
        assert_true(found[i].score > 0);
        if (i) assert_true(found[i - 1].score >= found[i].score);
        saw_a2 |= found[i].id == a_ids[2] && doc_of[i] == a;
        saw_b0 |= found[i].id == b_ids[0] && doc_of[i] == b;
        assert_true(found[i].id != other_ids[0]);
    }
    assert_true(saw_a2 && saw_b0);
    /* want caps the hits */
    CONF_EXPECT(cq_store_keyword_bm25(s, kb, terms, 2, NULL, 0, 1, found, doc_of, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(found[0].id, a_ids[0]);
    /* document by document, in the order asked: the best `want` of each */
    int64_t docs[] = {b, a};
    CONF_EXPECT(cq_store_keyword_bm25(s, kb, terms, 2, docs, 2, 1, found, doc_of, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(found[0].id, b_ids[0]);
    assert_int_equal(doc_of[0], b);
    assert_int_equal(found[1].id, a_ids[0]);
    assert_int_equal(doc_of[1], a);
    /* a term no clause holds */
    const char *nowhere[] = {"没有"};
    CONF_EXPECT(cq_store_keyword_bm25(s, kb, nowhere, 1, NULL, 0, 8, found, doc_of, &n, &err), CQ_OK);
    assert_int_equal(n, 0);

    /* a document rolled back is not in the index; one deleted leaves it */
    static const char *const c_texts[] = {"第一条 工资工资工资加班加班。"};
    int64_t c_ids[1], c;
    CONF_EXPECT(cq_store_begin(s, &err), CQ_OK);
    CONF_EXPECT(cq_store_doc_create(s, kb, "c-law", "c.md", "md", "c0ffee", 10, &c, &err), CQ_OK);
    cq_store_clause cc = {.ord = 0, .kind = 1, .path = "", .text = c_texts[0], .page_first = 1, .page_last = 1};
    CONF_EXPECT(cq_store_clause_add(s, kb, c, "c-law", &cc, &c_ids[0], &err), CQ_OK);
    cq_store_rollback(s);
    CONF_EXPECT(cq_store_keyword_bm25(s, kb, terms, 2, NULL, 0, 8, found, doc_of, &n, &err), CQ_OK);
    assert_int_equal(n, 3);
    CONF_EXPECT(cq_store_doc_delete(s, a, &err), CQ_OK);
    CONF_EXPECT(cq_store_keyword_bm25(s, kb, terms, 2, NULL, 0, 8, found, doc_of, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(found[0].id, b_ids[0]);
    assert_int_equal(doc_of[0], b);
    /* a KB deleted takes its index with it */
    CONF_EXPECT(cq_store_kb_delete(s, other_kb, &err), CQ_OK);
    CONF_EXPECT(cq_store_keyword_bm25(s, kb, terms, 2, NULL, 0, 8, found, doc_of, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
}

#endif
