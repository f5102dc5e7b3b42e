/* The conformance bodies of versions of regulations in the store (store/versions.c, written once on db/;
 * tests/store/conformance.h): two versions of a law grouped, their states on a day, a repeal by another document,
 * a person's corrections kept over a new analysis and undone by a reset — the same on SQLite and PostgreSQL. */
#ifndef CQ_TESTS_STORE_VERSIONS_BODIES_H
#define CQ_TESTS_STORE_VERSIONS_BODIES_H

#include <stdio.h>

#include "store/versions.h"
#include "tests/store/conformance.h"

/* A ready document: a header (preamble) and articles. */
static int64_t conf_versions_law(cq_store *s, int64_t kb, const char *name, const char *title, const char *sha,
                       const char *header, const char *const *articles, size_t n) {
    cq_err err = {0};
    int64_t doc;
    assert_int_equal(cq_store_begin(s, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(s, kb, name, name, "md", sha, 100, &doc, &err), CQ_OK);
    int ord = 0;
    if (header) {
        cq_store_clause c = {.ord = ord++, .kind = 2, .text = header};
        assert_int_equal(cq_store_clause_add(s, kb, doc, title, &c, NULL, &err), CQ_OK);
    }
    for (size_t i = 0; i < n; i++) {
        char label[64], key[24];
        const char *sp = strchr(articles[i], ' ');
        snprintf(label, sizeof label, "%.*s", (int)(sp - articles[i]), articles[i]);
        snprintf(key, sizeof key, "%zu", i + 1);
        cq_store_clause c = {.ord = ord++, .kind = 1, .label = label, .label_key = key, .path = label,
                             .text = articles[i]};
        assert_int_equal(cq_store_clause_add(s, kb, doc, title, &c, NULL, &err), CQ_OK);
    }
    assert_int_equal(cq_store_doc_finish(s, doc, CQ_DOC_READY, NULL, title, 0, ord, 1.0, "", &err), CQ_OK);
    assert_int_equal(cq_store_commit(s, &err), CQ_OK);
    return doc;
}

static const char *const law_v1[] = {
    "第一条 为了规范公司的组织和行为，制定本法。",
    "第二条 一人有限责任公司章程由股东制定。",
    "第三条 一人有限责任公司不设股东会。股东作出决定时，应当采用书面形式。",
    "第四条 本法自2006年1月1日起施行。",
};
static const char *const law_v2[] = {
    "第一条 为了规范公司的组织和行为，保护职工的合法权益，制定本法。",
    "第二条 公司应当依法登记。",
    "第三条 只有一个股东的有限责任公司不设股东会。股东作出决定时，应当采用书面形式。",
    "第四条 本法自2024年7月1日起施行。",
};

typedef struct {
    cq_store *s;
    int64_t kb, v1, v2;
} conf_versions;

/* KB "laws" with the 2018 and 2023 versions of the company law. */
CONF_MAYBE_UNUSED static void conf_versions_make(cq_store *s, conf_versions *f) {
    cq_err err = {0};
    f->s = s;
    CONF_EXPECT(cq_store_kb_create(s, "laws", &f->kb, &err), CQ_OK);
    f->v1 = conf_versions_law(s, f->kb, "公司法(2018-10-26)", "中华人民共和国公司法", "a1",
                              "中华人民共和国公司法\n1993年12月29日 通过\n2018年10月26日 第四次修正", law_v1, 4);
    f->v2 = conf_versions_law(s, f->kb, "公司法(2023-12-29)", "中华人民共和国公司法", "a2",
                              "中华人民共和国公司法\n2018年10月26日 第四次修正\n2023年12月29日 第二次修订", law_v2, 4);
}

static void conf_versions_groups(void **state) {
    conf_versions fx, *f = &fx;
    conf_versions_make(conf_store(state), f);
    cq_err err = {0};
    size_t n = 0;
    /* never analysed: unknown; ensure analyses both, once */
    cq_version_status v;
    assert_int_equal(cq_versions_status(f->s, f->v1, 20200101, &v, &err), CQ_OK);
    assert_int_equal(v.state, CQ_VERSION_UNKNOWN);
    assert_int_equal(cq_versions_ensure(f->s, f->kb, false, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(cq_versions_ensure(f->s, f->kb, false, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    cq_version_group g;
    assert_int_equal(cq_versions_group_of(f->s, f->v2, &g, &err), CQ_OK);
    assert_string_equal(g.key, "公司法");
    assert_int_equal(g.n, 2);
    assert_int_equal(g.v[0].doc_id, f->v1); /* oldest first */
    assert_int_equal(g.v[1].effective, 20240701);
    /* the version meant for a day */
    assert_int_equal(cq_version_group_pick(&g, 20200101, 0), 0);
    assert_int_equal(cq_version_group_pick(&g, 20240630, 0), 0); /* promulgated, not yet in force */
    assert_int_equal(cq_version_group_pick(&g, 20240701, 0), 1);
    assert_int_equal(cq_version_group_pick(&g, 20100101, 0), -1); /* before any */
    assert_int_equal(cq_version_group_pick(&g, 0, 2023), 1);
    assert_int_equal(cq_version_group_pick(&g, 0, 2018), 0);
    assert_int_equal(cq_version_group_pick(&g, 0, 2011), -1);
    assert_true(cq_version_group_prefers(&g, f->v1, 20200101, 0));
    assert_false(cq_version_group_prefers(&g, f->v2, 20200101, 0));
    assert_true(cq_version_group_prefers(&g, f->v2, 20250101, 0));
    assert_true(cq_version_group_prefers(&g, f->v1, 20100101, 0)); /* none meant: no preference */
    /* status */
    cq_version_status_in(&g, f->v1, 20200101, &v);
    assert_int_equal(v.state, CQ_VERSION_IN_FORCE);
    assert_int_equal(v.n_versions, 2);
    assert_int_equal(v.next.doc_id, f->v2);
    assert_int_equal(v.current.doc_id, f->v1);
    cq_version_status_in(&g, f->v1, 20250101, &v);
    assert_int_equal(v.state, CQ_VERSION_SUPERSEDED);
    assert_int_equal(v.current.doc_id, f->v2);
    cq_version_status_in(&g, f->v2, 20240101, &v);
    assert_int_equal(v.state, CQ_VERSION_NOT_YET);
    assert_int_equal(v.previous.doc_id, f->v1);
    assert_string_equal(cq_version_state_name(v.state), "not_yet_in_force");
    cq_version_status_in(&g, f->v2, 0, &v); /* today */
    assert_int_equal(v.state, CQ_VERSION_IN_FORCE);
    assert_string_equal(v.label, "2023年修订");
    cq_version_group_free(&g);
    /* the list of groups, and every document's status */
    cq_version_group *groups;
    assert_int_equal(cq_versions_list(f->s, f->kb, &groups, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    cq_version_group_free(&groups[0]);
    free(groups);
    cq_version_status *all;
    assert_int_equal(cq_versions_statuses(f->s, f->kb, 20200101, &all, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(cq_versions_find(all, n, f->v2)->state, CQ_VERSION_NOT_YET);
    assert_null(cq_versions_find(all, n, 999));
    free(all);
}

static void conf_versions_repeal_and_corrections(void **state) {
    conf_versions fx, *f = &fx;
    conf_versions_make(conf_store(state), f);
    cq_err err = {0};
    assert_int_equal(cq_versions_ensure(f->s, f->kb, false, NULL, &err), CQ_OK);
    /* another document repeals the regulation, from the day it takes effect */
    static const char *const new_law[] = {"第一条 为了规范企业，制定本法。",
                                          "第二条 本法自2030年1月1日起施行。《中华人民共和国公司法》同时废止。"};
    int64_t other = conf_versions_law(f->s, f->kb, "企业法(2029-06-01)", "中华人民共和国企业法", "a3", "2029年6月1日 通过", new_law, 2);
    assert_int_equal(cq_versions_analyse(f->s, other, &err), CQ_OK);
    cq_version_status v;
    assert_int_equal(cq_versions_status(f->s, f->v2, 20291231, &v, &err), CQ_OK);
    assert_int_equal(v.state, CQ_VERSION_IN_FORCE);
    assert_int_equal(cq_versions_status(f->s, f->v2, 20300101, &v, &err), CQ_OK);
    assert_int_equal(v.state, CQ_VERSION_REPEALED);
    assert_int_equal(v.repealed, 20300101);
    assert_int_equal(cq_versions_status(f->s, f->v1, 20300101, &v, &err), CQ_OK);
    assert_int_equal(v.state, CQ_VERSION_REPEALED);
    /* deleting the repealing document lifts the repeal */
    assert_int_equal(cq_store_doc_delete(f->s, other, &err), CQ_OK);
    assert_int_equal(cq_versions_status(f->s, f->v2, 20300101, &v, &err), CQ_OK);
    assert_int_equal(v.state, CQ_VERSION_IN_FORCE);
    /* a person's correction: another day of effect; kept over a new analysis; undone by a reset */
    cq_version_edit e = {.promulgated = -1, .effective = 20240901, .repealed = -1, .label = "2023年修订（更正）"};
    assert_int_equal(cq_versions_set(f->s, f->v2, &e, &err), CQ_OK);
    assert_int_equal(cq_versions_ensure(f->s, f->kb, true, NULL, &err), CQ_OK);
    assert_int_equal(cq_versions_status(f->s, f->v2, 20240801, &v, &err), CQ_OK);
    assert_int_equal(v.state, CQ_VERSION_NOT_YET);
    assert_true(v.by_user);
    assert_string_equal(v.label, "2023年修订（更正）");
    /* repealed by a person */
    e = (cq_version_edit){.promulgated = -1, .effective = -1, .repealed = 20250101};
    assert_int_equal(cq_versions_set(f->s, f->v2, &e, &err), CQ_OK);
    assert_int_equal(cq_versions_status(f->s, f->v2, 20250102, &v, &err), CQ_OK);
    assert_int_equal(v.state, CQ_VERSION_REPEALED);
    /* out of the group, then into another one by name */
    e = (cq_version_edit){.key = "", .promulgated = -1, .effective = -1, .repealed = 0};
    assert_int_equal(cq_versions_set(f->s, f->v2, &e, &err), CQ_OK);
    assert_int_equal(cq_versions_status(f->s, f->v1, 20250102, &v, &err), CQ_OK);
    assert_int_equal(v.n_versions, 1);
    assert_int_equal(v.state, CQ_VERSION_IN_FORCE);
    e = (cq_version_edit){.key = "《中华人民共和国公司法》", .promulgated = -1, .effective = -1, .repealed = -1};
    assert_int_equal(cq_versions_set(f->s, f->v2, &e, &err), CQ_OK);
    assert_int_equal(cq_versions_status(f->s, f->v1, 20250102, &v, &err), CQ_OK);
    assert_int_equal(v.n_versions, 2);
    /* invalid days */
    e = (cq_version_edit){.promulgated = 20230230, .effective = -1, .repealed = -1};
    assert_int_equal(cq_versions_set(f->s, f->v2, &e, &err), CQ_ERR_INVALID);
    /* back to the analysis */
    assert_int_equal(cq_versions_reset(f->s, f->v2, &err), CQ_OK);
    assert_int_equal(cq_versions_status(f->s, f->v2, 20240801, &v, &err), CQ_OK);
    assert_int_equal(v.state, CQ_VERSION_IN_FORCE);
    assert_false(v.by_user);
    assert_string_equal(v.label, "2023年修订");
}

/* The analysis from the clauses the caller holds (ingest's) reads those, not the stored ones; from the same clauses
 * it writes what the analysis from the store writes. */
CONF_MAYBE_UNUSED static void conf_versions_from_clauses(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb;
    assert_int_equal(cq_store_kb_create(s, "mem", &kb, &err), CQ_OK);
    const char *header = "中华人民共和国公司法\n1993年12月29日 通过\n2018年10月26日 第四次修正";
    const int64_t doc = conf_versions_law(s, kb, "公司法(2018-10-26)", "中华人民共和国公司法", "m1", header, law_v1, 4);
    cq_version_clause c[5] = {{2, header}};
    for (int i = 0; i < 4; i++) c[i + 1] = (cq_version_clause){1, law_v1[i]};
    cq_version_status from_store, from_memory;
    assert_int_equal(cq_versions_analyse(s, doc, &err), CQ_OK);
    assert_int_equal(cq_versions_status(s, doc, 20200101, &from_store, &err), CQ_OK);
    /* a header that is not what is stored: the analysis must take it */
    c[0].text = "中华人民共和国公司法\n1993年12月29日 通过\n2019年10月26日 第五次修正";
    assert_int_equal(cq_versions_analyse_clauses(s, doc, c, 5, &err), CQ_OK);
    assert_int_equal(cq_versions_status(s, doc, 20200101, &from_memory, &err), CQ_OK);
    assert_int_equal(from_store.effective, 20181026);
    assert_int_equal(from_memory.effective, 20191026);
    c[0].text = header;
    assert_int_equal(cq_versions_analyse_clauses(s, doc, c, 5, &err), CQ_OK);
    assert_int_equal(cq_versions_status(s, doc, 20200101, &from_memory, &err), CQ_OK);
    assert_int_equal(from_memory.effective, from_store.effective);
    assert_int_equal(from_memory.promulgated, from_store.promulgated);
    assert_string_equal(from_memory.label, from_store.label);
    assert_string_equal(from_memory.key, from_store.key);
    assert_int_equal(cq_versions_analyse_clauses(s, doc, NULL, 0, &err), CQ_OK); /* no clauses: name and title */
}

#endif
