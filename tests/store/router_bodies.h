/* store/router_rows.h's conformance bodies (tests/store/conformance.h): the router's reads, the same on SQLite and
 * PostgreSQL. */
#ifndef CQ_TESTS_STORE_ROUTER_BODIES_H
#define CQ_TESTS_STORE_ROUTER_BODIES_H

#include "store/router_rows.h"
#include "store/versions.h"
#include "tests/store/conformance.h"

/* A document of kb with its articles (label_key "1" … "n", chapter path "第一章" for the first two, "第二章" after)
 * and a preamble; ready unless status says otherwise. */
static int64_t conf_router_doc(cq_store *s, int64_t kb, const char *name, const char *title, const char *sha,
                               int n, cq_doc_state state, int64_t *ids) {
    cq_err err = {0};
    int64_t doc, id;
    CONF_EXPECT(cq_store_begin(s, &err), CQ_OK);
    CONF_EXPECT(cq_store_doc_create(s, kb, name, "x.md", "md", sha, 10, &doc, &err), CQ_OK);
    cq_store_clause pre = {.ord = 0, .kind = 3, .path = "", .text = "前言"};
    CONF_EXPECT(cq_store_clause_add(s, kb, doc, name, &pre, &id, &err), CQ_OK);
    for (int i = 1; i <= n; i++) {
        char key[8], label[32];
        snprintf(key, sizeof key, "%d", i);
        snprintf(label, sizeof label, "第%d条", i);
        cq_store_clause c = {.ord = i, .kind = 1, .label = label, .label_key = key,
                             .path = i <= 2 ? "第一章 总则" : "第二章 合同", .text = "条文"};
        CONF_EXPECT(cq_store_clause_add(s, kb, doc, name, &c, &id, &err), CQ_OK);
        if (ids) ids[i - 1] = id;
    }
    CONF_EXPECT(cq_store_doc_finish(s, doc, state, NULL, title, 1, n + 1, 1, "", &err), CQ_OK);
    CONF_EXPECT(cq_store_commit(s, &err), CQ_OK);
    return doc;
}

typedef struct {
    int64_t ids[8];
    char names[8][32];
    int titled[8];
    int n;
} conf_router_seen;

static void conf_router_seen_doc(void *ctx, int64_t doc_id, const char *name, const char *title) {
    conf_router_seen *seen = ctx;
    if (seen->n == 8) return;
    seen->ids[seen->n] = doc_id;
    snprintf(seen->names[seen->n], sizeof seen->names[0], "%s", name);
    seen->titled[seen->n++] = title != NULL;
}

static void conf_router_rows(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, kb2, n_docs = -1, max_id = -1, min_id = -1, ids[4], out[8];
    size_t n = 0;
    CONF_EXPECT(cq_store_kb_ensure(s, "k", &kb, &err), CQ_OK);
    CONF_EXPECT(cq_store_kb_ensure(s, "k2", &kb2, &err), CQ_OK);
    /* an empty KB */
    CONF_EXPECT(cq_store_router_docs_stat(s, kb, &n_docs, &max_id, &min_id, &err), CQ_OK);
    assert_true(n_docs == 0 && max_id == 0 && min_id == 0);
    cq_store_label_doc docs[4];
    CONF_EXPECT(cq_store_router_docs_with_key(s, kb, "1", docs, 4, &n, &err), CQ_OK);
    assert_int_equal(n, 0);

    /* documents: named so that their ids and their names sort differently; one failed, one in another KB */
    int64_t b = conf_router_doc(s, kb, "b-law", "乙法", "h1", 4, CQ_DOC_READY, ids);
    int64_t a = conf_router_doc(s, kb, "a-law", NULL, "h2", 2, CQ_DOC_READY, NULL);
    conf_router_doc(s, kb, "c-law", "丙法", "h3", 5, CQ_DOC_FAILED, NULL);
    int64_t other = conf_router_doc(s, kb2, "d-law", "丁法", "h4", 5, CQ_DOC_READY, NULL);
    CONF_EXPECT(cq_store_router_docs_stat(s, kb, &n_docs, &max_id, &min_id, &err), CQ_OK);
    assert_int_equal(n_docs, 2);
    assert_int_equal(max_id, a);
    assert_int_equal(min_id, b);
    conf_router_seen seen = {0};
    CONF_EXPECT(cq_store_router_docs(s, kb, conf_router_seen_doc, &seen, &err), CQ_OK);
    assert_int_equal(seen.n, 2);
    assert_int_equal(seen.ids[0], b); /* by id, not by name */
    assert_string_equal(seen.names[0], "b-law");
    assert_true(seen.titled[0]);
    assert_int_equal(seen.ids[1], a);
    assert_false(seen.titled[1]);

    /* a clause by label key: the first by order, one at most, never past max */
    CONF_EXPECT(cq_store_router_by_key(s, b, "3", out, 8, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(out[0], ids[2]);
    CONF_EXPECT(cq_store_router_by_key(s, b, "9", out, 8, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    CONF_EXPECT(cq_store_router_by_key(s, b, "4", out, 1, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    /* a chapter's articles in order, up to what is left of max */
    n = 0;
    CONF_EXPECT(cq_store_router_by_path(s, b, "%第二章%", out, 8, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(out[0], ids[2]);
    assert_int_equal(out[1], ids[3]);
    n = 1;
    CONF_EXPECT(cq_store_router_by_path(s, b, "%第一章%", out, 2, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(out[1], ids[0]);
    CONF_EXPECT(cq_store_router_by_path(s, b, "%第一章%", out, 2, &n, &err), CQ_OK);
    assert_int_equal(n, 2);

    /* the ready documents of the KB with a label, by id, with what to call them (the title, else the name), their
     * version group ("" before the versions are analysed) and that clause's label: "3" and "4" are b's only (c failed, d is another
     * KB's); "1" is b's and a's; never past max */
    CONF_EXPECT(cq_store_router_docs_with_key(s, kb, "3", docs, 4, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(docs[0].doc_id, b);
    assert_string_equal(docs[0].name, "乙法");
    assert_string_equal(docs[0].group, "");
    assert_string_equal(docs[0].label, "第3条"); /* its clause's label: a Chinese reference's kind */
    cq_store_label_docs_free(docs, n);
    CONF_EXPECT(cq_store_router_docs_with_key(s, kb, "1", docs, 4, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_true(docs[0].doc_id == b && docs[1].doc_id == a);
    assert_string_equal(docs[0].name, "乙法");
    assert_string_equal(docs[1].name, "a-law");
    cq_store_label_docs_free(docs, n);
    CONF_EXPECT(cq_store_router_docs_with_key(s, kb, "1", docs, 1, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    cq_store_label_docs_free(docs, n);
    CONF_EXPECT(cq_store_router_docs_with_key(s, kb, "5", docs, 4, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    CONF_EXPECT(cq_store_router_docs_with_key(s, kb2, "5", docs, 4, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(docs[0].doc_id, other);
    cq_store_label_docs_free(docs, n);
    /* with the versions analysed, each document's group */
    CONF_EXPECT(cq_versions_ensure(s, kb, false, NULL, &err), CQ_OK);
    CONF_EXPECT(cq_store_router_docs_with_key(s, kb, "1", docs, 4, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_true(docs[0].group[0] && docs[1].group[0] && strcmp(docs[0].group, docs[1].group));
    cq_store_label_docs_free(docs, n);
}

#endif
