/* store/versions.c (written once on db/) on PostgreSQL gives what it gives on SQLite. Every step is done on
 * both stores (the same documents, in the same order, so the same ids), and after each one every document's status
 * on a set of days, the groups of the KB and each document's group are compared field by field. Run through
 * tests/pg/cluster.sh (CLAUSEQA_PG). */
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

#include "store/store.h"
#include "pg_handle.h"
#include "store/versions.h"
#include "pg_fixture.h"

typedef struct {
    char dir[64], info[512];
    cq_store *s;  /* SQLite */
    cq_store *ps; /* PostgreSQL */
    cq_pg *pg;    /* ps's connection, for the writes the test makes itself */
    int64_t kb;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/cq-vpg-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    char path[128];
    snprintf(path, sizeof path, "%s/clauseqa.db", f->dir);
    cq_err err = {0};
    if (cq_store_open(path, &f->s, &err)) return -1;
    assert_int_equal(pg_fresh_database("v", f->info, sizeof f->info), 0);
    if (cq_store_open_uri(f->info, &f->ps, &err)) return -1;
    f->pg = cq_store_pg(f->ps);
    int64_t kb_pg = 0;
    if (cq_store_kb_create(f->s, "laws", &f->kb, &err) || cq_store_kb_ensure(f->ps, "laws", &kb_pg, &err)) return -1;
    if (kb_pg != f->kb) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    cq_store_close(f->s);
    cq_store_close(f->ps);
    char path[128];
    snprintf(path, sizeof path, "%s/clauseqa.db", f->dir);
    unlink(path);
    strcat(path, "-wal");
    unlink(path);
    path[strlen(path) - 4] = 0;
    strcat(path, "-shm");
    unlink(path);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* The same document in both stores: a header clause (kind 2), articles (kind 1), ready unless processing. */
static int64_t add_law(fixture *f, const char *name, const char *title, const char *sha, const char *header,
                       const char *const *articles, size_t n, bool ready) {
    cq_err err = {0};
    int64_t doc = 0, doc_pg = 0;
    cq_store_clause c[16];
    char labels[16][64], keys[16][24];
    size_t nc = 0;
    if (header) c[nc++] = (cq_store_clause){.ord = 0, .kind = 2, .text = header};
    for (size_t i = 0; i < n; i++) {
        const char *sp = strchr(articles[i], ' ');
        snprintf(labels[i], sizeof labels[i], "%.*s", sp ? (int)(sp - articles[i]) : 0, articles[i]);
        snprintf(keys[i], sizeof keys[i], "%zu", i + 1);
        c[nc] = (cq_store_clause){.ord = (int)nc, .kind = sp ? 1 : 3, .label = labels[i], .label_key = keys[i],
                                  .path = labels[i], .text = articles[i]};
        nc++;
    }
    assert_int_equal(cq_store_begin(f->s, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(f->s, f->kb, name, name, "md", sha, 100, &doc, &err), CQ_OK);
    for (size_t i = 0; i < nc; i++) assert_int_equal(cq_store_clause_add(f->s, f->kb, doc, title, &c[i], NULL, &err), CQ_OK);
    if (ready)
        assert_int_equal(cq_store_doc_finish(f->s, doc, CQ_DOC_READY, NULL, title, 0, (int)nc, 1.0, "", &err), CQ_OK);
    assert_int_equal(cq_store_commit(f->s, &err), CQ_OK);

    assert_int_equal(cq_store_doc_create(f->ps, f->kb, name, name, "md", sha, 100, &doc_pg, &err), CQ_OK);
    assert_int_equal(cq_pg_doc_add_clauses(f->pg, doc_pg, title, c, nc, NULL, &err), CQ_OK);
    if (ready) {
        char id[32], count[16];
        snprintf(id, sizeof id, "%lld", (long long)doc_pg);
        snprintf(count, sizeof count, "%zu", nc);
        const char *params[] = {id, title, count};
        PGresult *r = PQexecParams(cq_pg_conn(f->pg),
                                   "UPDATE documents SET status = 'ready', title = $2, n_clauses = $3 WHERE id = $1", 3,
                                   NULL, params, NULL, NULL, 0);
        assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
        PQclear(r);
    }
    assert_int_equal(doc, doc_pg);
    return doc;
}

static void delete_doc(fixture *f, int64_t doc) {
    cq_err err = {0};
    assert_int_equal(cq_store_doc_delete(f->s, doc, &err), CQ_OK);
    assert_int_equal(cq_store_doc_delete(f->ps, doc, &err), CQ_OK);
}

/* ---- comparing the two stores --------------------------------------------------------------------------- */

static void same_entry(const cq_version_entry *a, const cq_version_entry *b) {
    assert_int_equal(a->doc_id, b->doc_id);
    assert_string_equal(a->name, b->name);
    assert_string_equal(a->label, b->label);
    assert_int_equal(a->promulgated, b->promulgated);
    assert_int_equal(a->effective, b->effective);
    assert_int_equal(a->repealed, b->repealed);
    assert_int_equal(a->by_user, b->by_user);
}

static void same_status(const cq_version_status *a, const cq_version_status *b) {
    assert_int_equal(a->doc_id, b->doc_id);
    assert_int_equal(a->state, b->state);
    assert_int_equal(a->on, b->on);
    assert_int_equal(a->state_today, b->state_today);
    assert_string_equal(a->key, b->key);
    assert_string_equal(a->label, b->label);
    assert_int_equal(a->promulgated, b->promulgated);
    assert_int_equal(a->effective, b->effective);
    assert_int_equal(a->repealed, b->repealed);
    assert_int_equal(a->by_user, b->by_user);
    assert_int_equal(a->n_versions, b->n_versions);
    assert_int_equal(a->index, b->index);
    same_entry(&a->previous, &b->previous);
    same_entry(&a->next, &b->next);
    same_entry(&a->current, &b->current);
}

static void same_group(const cq_version_group *a, const cq_version_group *b) {
    assert_string_equal(a->key, b->key);
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->repealed, b->repealed);
    for (size_t i = 0; i < a->n; i++) same_entry(&a->v[i], &b->v[i]);
}

static const cq_date days[] = {20050101, 20200101, 20240630, 20240801, 20250102, 20291231, 20300101, 0};

/* Everything versions.h reads, from both stores; returns how many documents have a status (analysed, ready). */
static size_t same_everywhere(fixture *f, int64_t max_doc) {
    cq_err err = {0};
    size_t n_status = 0;
    for (size_t d = 0; d < sizeof days / sizeof days[0]; d++) {
        cq_version_status *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        assert_int_equal(cq_versions_statuses(f->s, f->kb, days[d], &a, &na, &err), CQ_OK);
        assert_int_equal(cq_versions_statuses(f->ps, f->kb, days[d], &b, &nb, &err), CQ_OK);
        assert_int_equal(na, nb);
        for (size_t i = 0; i < na; i++) same_status(&a[i], &b[i]);
        n_status = na;
        free(a);
        free(b);
        for (int64_t doc = 1; doc <= max_doc; doc++) {
            cq_version_status x, y;
            assert_int_equal(cq_versions_status(f->s, doc, days[d], &x, &err), CQ_OK);
            assert_int_equal(cq_versions_status(f->ps, doc, days[d], &y, &err), CQ_OK);
            same_status(&x, &y);
        }
    }
    cq_version_group *ga = NULL, *gb = NULL;
    size_t na = 0, nb = 0;
    assert_int_equal(cq_versions_list(f->s, f->kb, &ga, &na, &err), CQ_OK);
    assert_int_equal(cq_versions_list(f->ps, f->kb, &gb, &nb, &err), CQ_OK);
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        same_group(&ga[i], &gb[i]);
        cq_version_group_free(&ga[i]);
        cq_version_group_free(&gb[i]);
    }
    free(ga);
    free(gb);
    for (int64_t doc = 1; doc <= max_doc; doc++) {
        cq_version_group a, b;
        cq_status ra = cq_versions_group_of(f->s, doc, &a, &err);
        cq_status rb = cq_versions_group_of(f->ps, doc, &b, &err);
        assert_int_equal(ra, rb);
        if (ra) continue;
        same_group(&a, &b);
        cq_version_group_free(&a);
        cq_version_group_free(&b);
    }
    return n_status;
}

/* ---- the fixture: two versions of a law, a copy, a law of its own, a document without articles -------------- */

static const char *const law_v1[] = {
    "第一条 为了规范公司的组织和行为，制定本法。",
    "第二条 一人有限责任公司章程由股东制定。",
    "第三条 一人有限责任公司不设股东会。",
    "第四条 本法自2006年1月1日起施行。",
};
static const char *const law_v2[] = {
    "第一条 为了规范公司的组织和行为，保护职工的合法权益，制定本法。",
    "第二条 公司应当依法登记。",
    "第三条 只有一个股东的有限责任公司不设股东会。",
    "第四条 本法自2024年7月1日起施行。",
};
static const char *const labour[] = {"第一条 为了保护劳动者的合法权益，制定本法。", "第二条 本法自1995年1月1日起施行。"};
static const char *const memo[] = {"This memorandum records the parties' understanding as of 1 March 2020."};
static const char *const new_law[] = {"第一条 为了规范企业，制定本法。",
                                      "第二条 本法自2030年1月1日起施行。《中华人民共和国公司法》同时废止。"};

static void test_versions_parity(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    int64_t v1 = add_law(f, "公司法(2018-10-26)", "中华人民共和国公司法", "a1",
                         "中华人民共和国公司法\n1993年12月29日 通过\n2018年10月26日 第四次修正", law_v1, 4, true);
    int64_t v2 = add_law(f, "公司法(2023-12-29)", "中华人民共和国公司法", "a2",
                         "中华人民共和国公司法\n2018年10月26日 第四次修正\n2023年12月29日 第二次修订", law_v2, 4, true);
    int64_t copy = add_law(f, "公司法（2023年修订）", "中华人民共和国公司法", "a3",
                           "中华人民共和国公司法\n2023年12月29日 第二次修订", law_v2, 4, true);
    add_law(f, "劳动法", "中华人民共和国劳动法", "a4", "1994年7月5日 通过", labour, 2, true);
    add_law(f, "memo-2020", "Memorandum", "a5", NULL, memo, 1, true);
    int64_t pending = add_law(f, "公司法(2030-01-01)", "中华人民共和国公司法", "a6", NULL, law_v2, 4, false);
    int64_t max_doc = pending;

    /* never analysed: unknown on both; ensure analyses the ready ones, once */
    assert_int_equal(same_everywhere(f, max_doc), 0);
    size_t na = 0, nb = 0;
    assert_int_equal(cq_versions_ensure(f->s, f->kb, false, &na, &err), CQ_OK);
    assert_int_equal(cq_versions_ensure(f->ps, f->kb, false, &nb, &err), CQ_OK);
    assert_int_equal(na, 5);
    assert_int_equal(nb, 5);
    assert_int_equal(cq_versions_ensure(f->ps, f->kb, false, &nb, &err), CQ_OK);
    assert_int_equal(nb, 0);
    assert_int_equal(same_everywhere(f, max_doc), 5);
    cq_version_group g;
    assert_int_equal(cq_versions_group_of(f->ps, v2, &g, &err), CQ_OK);
    assert_string_equal(g.key, "公司法");
    assert_int_equal(g.n, 3);
    assert_int_equal(g.v[0].doc_id, v1);
    assert_int_equal(g.v[1].effective, 20240701);
    cq_version_group_free(&g);
    assert_int_equal(cq_versions_group_of(f->ps, pending, &g, &err), CQ_ERR_NOT_FOUND);

    /* another document repeals the regulation; deleting it lifts the repeal (cascade of doc_repeals) */
    int64_t other = add_law(f, "企业法(2029-06-01)", "中华人民共和国企业法", "a7", "2029年6月1日 通过", new_law, 2, true);
    max_doc = other;
    assert_int_equal(cq_versions_analyse(f->s, other, &err), CQ_OK);
    assert_int_equal(cq_versions_analyse(f->ps, other, &err), CQ_OK);
    same_everywhere(f, max_doc);
    cq_version_status v;
    assert_int_equal(cq_versions_status(f->ps, v2, 20300101, &v, &err), CQ_OK);
    assert_int_equal(v.state, CQ_VERSION_REPEALED);
    assert_int_equal(v.repealed, 20300101);
    assert_int_equal(pg_count(f->pg, "SELECT count(*) FROM doc_repeals"), 1);
    delete_doc(f, other);
    assert_int_equal(pg_count(f->pg, "SELECT count(*) FROM doc_repeals"), 0);
    same_everywhere(f, max_doc);
    assert_int_equal(cq_versions_status(f->ps, v2, 20300101, &v, &err), CQ_OK);
    assert_int_equal(v.state, CQ_VERSION_IN_FORCE);

    /* a person's corrections, each kept over a new analysis, then undone */
    const cq_version_edit edits[] = {
        {.promulgated = -1, .effective = 20240901, .repealed = -1, .label = "2023年修订（更正）"},
        {.promulgated = -1, .effective = -1, .repealed = 20250101},
        {.key = "", .promulgated = -1, .effective = -1, .repealed = 0},
        {.key = "《中华人民共和国公司法》", .promulgated = -1, .effective = -1, .repealed = -1},
        {.key = "劳动法", .promulgated = 20000101, .effective = 0, .repealed = -1},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        int64_t doc = i == 4 ? copy : v2;
        assert_int_equal(cq_versions_set(f->s, doc, &edits[i], &err), CQ_OK);
        assert_int_equal(cq_versions_set(f->ps, doc, &edits[i], &err), CQ_OK);
        assert_int_equal(cq_versions_ensure(f->s, f->kb, true, NULL, &err), CQ_OK);
        assert_int_equal(cq_versions_ensure(f->ps, f->kb, true, &nb, &err), CQ_OK);
        assert_int_equal(nb, 5);
        same_everywhere(f, max_doc);
    }
    assert_int_equal(cq_versions_status(f->ps, v2, 20250102, &v, &err), CQ_OK);
    assert_true(v.by_user);
    assert_int_equal(v.n_versions, 2);
    const cq_version_edit bad = {.promulgated = 20230230, .effective = -1, .repealed = -1};
    assert_int_equal(cq_versions_set(f->ps, v2, &bad, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_versions_set(f->ps, 999999, &edits[0], &err), CQ_ERR_NOT_FOUND);
    for (int64_t doc = v2; doc <= copy; doc++) {
        assert_int_equal(cq_versions_reset(f->s, doc, &err), CQ_OK);
        assert_int_equal(cq_versions_reset(f->ps, doc, &err), CQ_OK);
    }
    same_everywhere(f, max_doc);
    assert_int_equal(cq_versions_status(f->ps, v2, 20240801, &v, &err), CQ_OK);
    assert_false(v.by_user);
    assert_string_equal(v.label, "2023年修订");
    assert_int_equal(v.state, CQ_VERSION_IN_FORCE);

    /* the pending document becomes ready: ensure analyses it alone */
    assert_int_equal(pg_count(f->pg, "SELECT count(*) FROM doc_versions"), 5);
    assert_int_equal(cq_versions_ensure(f->ps, f->kb, false, &nb, &err), CQ_OK);
    assert_int_equal(nb, 0);
}

/* Two nodes: an analysis on one never overwrites a correction made on the other; the caller's transaction covers
 * an analysis (rolled back, nothing stays). */
static void test_versions_two_nodes(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    int64_t v1 = add_law(f, "公司法(2018-10-26)", "中华人民共和国公司法", "a1",
                         "中华人民共和国公司法\n2018年10月26日 第四次修正", law_v1, 4, true);
    cq_store *other = NULL;
    assert_int_equal(cq_store_open_uri(f->info, &other, &err), CQ_OK);
    assert_int_equal(cq_versions_analyse(f->ps, v1, &err), CQ_OK);
    const cq_version_edit e = {.promulgated = -1, .effective = 20190101, .repealed = -1, .label = "更正"};
    assert_int_equal(cq_versions_set(other, v1, &e, &err), CQ_OK);
    assert_int_equal(cq_versions_analyse(f->ps, v1, &err), CQ_OK);
    assert_int_equal(cq_versions_ensure(f->ps, f->kb, true, NULL, &err), CQ_OK);
    cq_version_status v;
    assert_int_equal(cq_versions_status(f->ps, v1, 0, &v, &err), CQ_OK);
    assert_int_equal(v.effective, 20190101);
    assert_string_equal(v.label, "更正");
    assert_true(v.by_user);

    assert_int_equal(cq_store_begin(other, &err), CQ_OK);
    assert_int_equal(cq_versions_reset(other, v1, &err), CQ_OK);
    cq_store_rollback(other);
    assert_int_equal(cq_versions_status(f->ps, v1, 0, &v, &err), CQ_OK);
    assert_true(v.by_user);
    cq_store_close(other);
    /* deleting the document removes its row */
    assert_int_equal(cq_store_doc_delete(f->ps, v1, &err), CQ_OK);
    assert_int_equal(pg_count(f->pg, "SELECT count(*) FROM doc_versions"), 0);
}

int main(void) {
    PG_FIXTURE_REQUIRE_SERVER();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_versions_parity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_versions_two_nodes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
