/* index/query and index/retrieve: the parsed question (type, language, reference, terms, titles), retrieval
 * modes and their default, BM25 with the named documents first and the local-regulation prior (LOCAL_PRIOR),
 * fusion order (router hits first, then BM25, no duplicates), k, and the reranking stage. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "search/query.h"
#include "search/retrieve.h"
#include "test_store_util.h"

/* ---- modes -------------------------------------------------------------------------------------------------- */

/* Retrieval modes parse both ways, the default is what its name says, and every hit source has its own printed
 * name (a dense hit was once shown as "bm25" by the CLI). */
static void test_modes(void **state) {
    (void)state;
    cq_err err = {0};
    assert_int_equal(cq_retrieve_parse_mode("router,bm25,dense", &err),
                     CQ_RETRIEVE_ROUTER | CQ_RETRIEVE_BM25 | CQ_RETRIEVE_DENSE);
    assert_int_equal(cq_retrieve_parse_mode("hybrid", &err), CQ_RETRIEVE_HYBRID);
    assert_int_equal(cq_retrieve_parse_mode("bm25", &err), CQ_RETRIEVE_BM25);
    assert_int_equal(cq_retrieve_parse_mode(CQ_RETRIEVE_DEFAULT_MODE, &err), CQ_RETRIEVE_DEFAULT_MODES);
    assert_int_equal(cq_retrieve_parse_mode(NULL, &err), CQ_RETRIEVE_DEFAULT_MODES);
    assert_int_equal(cq_retrieve_parse_mode("bm25,semantic", &err), 0);
    assert_non_null(strstr(err.msg, "semantic"));
    assert_int_equal(cq_retrieve_parse_mode("", &err), 0);
    assert_int_equal(cq_retrieve_parse_mode("router,bm25,rerank", &err), CQ_RETRIEVE_HYBRID | CQ_RETRIEVE_RERANK);
    assert_int_equal(cq_retrieve_parse_mode("rerank", &err), 0); /* nothing to rerank */
    assert_non_null(strstr(err.msg, "router,bm25,rerank"));
    assert_string_equal(cq_retrieve_source_name(CQ_RETRIEVE_ROUTER), "router");
    assert_string_equal(cq_retrieve_source_name(CQ_RETRIEVE_BM25), "bm25");
    assert_string_equal(cq_retrieve_source_name(CQ_RETRIEVE_DENSE), "dense");
}

/* ---- the query ---------------------------------------------------------------------------------------------- */

static int has_term(char **terms, size_t n, const char *t) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(terms[i], t)) return 1;
    return 0;
}

static void test_query_text(void **state) {
    (void)state;
    cq_query q;
    cq_err err = {0};
    assert_int_equal(cq_query_parse(NULL, 0, "劳动法第四十四条规定了什么？", &q, &err), CQ_OK);
    assert_string_equal(q.text, "劳动法第四十四条规定了什么？");
    assert_int_equal(q.type, CQ_QUERY_CLAUSE);
    assert_int_equal(q.lang, CQ_QUERY_ZH);
    assert_string_equal(q.ref.key, "44");
    assert_int_equal(q.kb_id, 0);
    assert_int_equal(q.n_titles, 0);
    /* BM25 searches what the question is about: the reference's digits are not terms, nor question words. */
    assert_true(has_term(q.terms, q.n_terms, "劳动"));
    assert_false(has_term(q.terms, q.n_terms, "四十"));
    assert_false(has_term(q.terms, q.n_terms, "规定"));
    assert_false(has_term(q.terms, q.n_terms, "什么"));
    /* The answer's coverage counts the whole question. */
    assert_true(has_term(q.all_terms, q.n_all_terms, "四十"));
    assert_true(q.n_all_terms > q.n_terms);
    cq_query_free(&q);

    assert_int_equal(cq_query_parse(NULL, 0, "What is the notice period under Section 7.2?", &q, &err), CQ_OK);
    assert_int_equal(q.type, CQ_QUERY_CLAUSE);
    assert_int_equal(q.lang, CQ_QUERY_EN);
    assert_string_equal(q.ref.key, "7.2");
    assert_true(has_term(q.terms, q.n_terms, "notice"));
    assert_true(has_term(q.terms, q.n_terms, "period"));
    assert_false(has_term(q.terms, q.n_terms, "section"));
    assert_false(has_term(q.terms, q.n_terms, "the"));
    assert_false(has_term(q.terms, q.n_terms, "under"));
    assert_true(has_term(q.all_terms, q.n_all_terms, "section"));
    cq_query_free(&q);

    /* A topic question: nothing blanked, terms deduplicated. */
    assert_int_equal(cq_query_parse(NULL, 0, "加班 加班 加班费", &q, &err), CQ_OK);
    assert_int_equal(q.type, CQ_QUERY_TOPIC);
    assert_int_equal(q.ref.start, 0);
    assert_int_equal(q.ref.end, 0);
    assert_int_equal(q.n_terms, q.n_all_terms);
    size_t n_jiaban = 0;
    for (size_t i = 0; i < q.n_terms; i++) n_jiaban += !strcmp(q.terms[i], "加班");
    assert_int_equal(n_jiaban, 1);
    cq_query_free(&q);

    /* A 款 without an article: a follow-up's fragment, its span set, no key. */
    assert_int_equal(cq_query_parse(NULL, 0, "那第二款呢？", &q, &err), CQ_OK);
    assert_int_equal(q.type, CQ_QUERY_PARAGRAPH);
    assert_string_equal(q.ref.key, "");
    assert_int_equal(q.ref.start, strlen("那"));
    assert_int_equal(q.ref.end, strlen("那第二款"));
    cq_query_free(&q);

    /* A long question keeps its first CQ_QUERY_MAX_TERMS terms. */
    char longq[2048] = "";
    for (int i = 0; i < 60; i++) {
        char w[16];
        snprintf(w, sizeof w, "word%02d ", i);
        strcat(longq, w);
    }
    assert_int_equal(cq_query_parse(NULL, 0, longq, &q, &err), CQ_OK);
    assert_int_equal(q.n_terms, CQ_QUERY_MAX_TERMS);
    assert_true(has_term(q.terms, q.n_terms, "word00"));
    assert_false(has_term(q.terms, q.n_terms, "word59"));
    cq_query_free(&q);

    assert_int_equal(cq_query_parse(NULL, 0, NULL, &q, &err), CQ_ERR_INVALID);
    cq_query_free(&q); /* a failed parse leaves nothing to free; freeing twice is harmless */
}

/* ---- retrieval ---------------------------------------------------------------------------------------------- */

static const char *const labour_law[][4] = {
    {"第三条", "3", "第一章 总则 > 第三条", "第三条 劳动者享有平等就业和选择职业的权利。"},
    {"第四十四条", "44", "第四章 工作时间和休息休假 > 第四十四条",
     "第四十四条 有下列情形之一的，用人单位应当按照下列标准支付高于劳动者正常工作时间工资的工资报酬：\n"
     "（一）安排劳动者延长工作时间的，支付不低于工资的百分之一百五十的工资报酬；\n"
     "（二）休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬。"},
    {"第五十条", "50", "第五章 工资 > 第五十条", "第五十条 工资应当以货币形式按月支付给劳动者本人。"},
};
/* Says more about overtime pay than the labour law does, so that BM25 alone would rank it first. */
static const char *const wage_rules[][4] = {
    {"第八条", "8", "第二章 加班工资 > 第八条",
     "第八条 加班工资的支付：加班工资按照加班时间计算，加班工资应当在加班的当月支付，加班工资不得克扣。"},
};
/* The same rule in a local and a national regulation, word for word. */
static const char *const meetings[][4] = {
    {"第十条", "10", "第二章 业主大会 > 第十条", "第十条 业主大会会议分为定期会议和临时会议，定期会议每年召开一次。"},
};

typedef struct {
    cq_store *s;
    int64_t kb, labour, wages, local, national;
} fixture;

static int setup_kb(void **state) {
    if (test_store_setup(state)) return -1;
    fixture *f = calloc(1, sizeof *f);
    cq_err err = {0};
    f->s = *state;
    if (cq_store_kb_ensure(f->s, "t", &f->kb, &err)) return -1;
    f->labour = test_add_doc(f->s, f->kb, "劳动法(2018-12-29)", "中华人民共和国劳动法", "h1", labour_law, 3);
    f->wages = test_add_doc(f->s, f->kb, "工资支付办法", "工资支付办法", "h2", wage_rules, 1);
    /* the local one first: on equal BM25 scores the lower clause id would win */
    f->local = test_add_doc(f->s, f->kb, "上海市住宅物业管理规定", "会议规则甲", "h3", meetings, 1);
    f->national = test_add_doc(f->s, f->kb, "物业管理条例(2018-03-19)", "会议规则乙", "h4", meetings, 1);
    *state = f;
    return 0;
}

static int teardown_kb(void **state) {
    fixture *f = *state;
    *state = f->s;
    free(f);
    return test_store_teardown(state);
}

static cq_status retrieve(fixture *f, const char *question, const cq_retrieve_options *o, cq_hits *h, cq_err *err) {
    cq_query q;
    cq_status rc = cq_query_parse(f->s, f->kb, question, &q, err);
    if (!rc) rc = cq_retrieve(f->s, &q, o, h, err);
    cq_query_free(&q);
    return rc;
}

static void assert_no_duplicates(const cq_hits *h) {
    for (size_t i = 0; i < h->n; i++)
        for (size_t j = 0; j < i; j++) assert_true(h->hits[i].clause_id != h->hits[j].clause_id);
}

static void test_query_titles(void **state) {
    fixture *f = *state;
    cq_query q;
    cq_err err = {0};
    assert_int_equal(cq_query_parse(f->s, f->kb, "《中华人民共和国劳动法》第四十四条第二款", &q, &err), CQ_OK);
    assert_int_equal(q.kb_id, f->kb);
    assert_int_equal(q.n_titles, 1);
    assert_int_equal(q.titles[0].doc_id, f->labour);
    assert_int_equal(q.ref.paragraph, 2);
    cq_query_free(&q);
}

static void test_router_first(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    cq_hits h;
    /* Hybrid: the named clause first (router, exact), then BM25 hits by score, none twice. */
    assert_int_equal(retrieve(f, "劳动法第三条 平等就业", &(cq_retrieve_options){.k = 5}, &h, &err), CQ_OK);
    assert_true(h.n >= 2);
    assert_int_equal(h.hits[0].source, CQ_RETRIEVE_ROUTER);
    assert_string_equal(h.hits[0].label, "第三条");
    assert_int_equal(h.hits[0].doc_id, f->labour);
    assert_true(h.hits[0].score == 1000);
    for (size_t i = 1; i < h.n; i++) {
        assert_int_equal(h.hits[i].source, CQ_RETRIEVE_BM25);
        if (i > 1) assert_true(h.hits[i].score <= h.hits[i - 1].score);
    }
    assert_no_duplicates(&h);
    assert_true(h.n_query_terms > 0);
    cq_hits_free(&h);
    /* The 款 and 项 the question names ride on the router hit (the answer recites them). */
    assert_int_equal(retrieve(f, "劳动法第四十四条第一款第二项", &(cq_retrieve_options){.modes = CQ_RETRIEVE_ROUTER}, &h,
                              &err),
                     CQ_OK);
    assert_int_equal(h.n, 1);
    assert_int_equal(h.hits[0].paragraph, 1);
    assert_int_equal(h.hits[0].item, 2);
    assert_int_equal(h.hits[0].n_boxes, 1);
    assert_int_equal(h.hits[0].page_first, 1);
    cq_hits_free(&h);
    /* k = 1: only the exact clause. A missing clause gives no router hit, only BM25 ones. */
    assert_int_equal(retrieve(f, "劳动法第三条 平等就业", &(cq_retrieve_options){.k = 1}, &h, &err), CQ_OK);
    assert_int_equal(h.n, 1);
    assert_int_equal(h.hits[0].source, CQ_RETRIEVE_ROUTER);
    cq_hits_free(&h);
    assert_int_equal(retrieve(f, "劳动法第九百条 加班工资", NULL, &h, &err), CQ_OK);
    assert_true(h.n >= 1);
    for (size_t i = 0; i < h.n; i++) assert_int_equal(h.hits[i].source, CQ_RETRIEVE_BM25);
    cq_hits_free(&h);
    /* Router alone on a topic question: nothing. */
    assert_int_equal(retrieve(f, "加班工资怎么支付？", &(cq_retrieve_options){.modes = CQ_RETRIEVE_ROUTER}, &h, &err),
                     CQ_OK);
    assert_int_equal(h.n, 0);
    cq_hits_free(&h);
}

static void test_bm25_named_document_first(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    cq_hits h;
    cq_retrieve_options bm25 = {.modes = CQ_RETRIEVE_BM25};
    /* Unnamed: the wage rules say most about overtime pay. */
    assert_int_equal(retrieve(f, "加班工资怎么支付？", &bm25, &h, &err), CQ_OK);
    assert_true(h.n >= 2);
    assert_int_equal(h.hits[0].doc_id, f->wages);
    cq_hits_free(&h);
    /* Named: the labour law's clauses come first, then the rest of the KB. */
    assert_int_equal(retrieve(f, "劳动法里加班工资怎么支付？", &bm25, &h, &err), CQ_OK);
    assert_true(h.n >= 2);
    assert_int_equal(h.hits[0].doc_id, f->labour);
    size_t first_other = 0;
    while (first_other < h.n && h.hits[first_other].doc_id == f->labour) first_other++;
    assert_true(first_other < h.n);
    for (size_t i = first_other; i < h.n; i++) assert_true(h.hits[i].doc_id != f->labour);
    assert_no_duplicates(&h);
    cq_hits_free(&h);
}

static const cq_hit *hit_of(const cq_hits *h, int64_t doc_id) {
    for (size_t i = 0; i < h->n; i++)
        if (h->hits[i].doc_id == doc_id) return &h->hits[i];
    fail_msg("document %lld not retrieved", (long long)doc_id);
    return NULL;
}

static void test_local_prior(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    cq_hits h;
    cq_retrieve_options bm25 = {.modes = CQ_RETRIEVE_BM25};
    /* The same text in a local and a national regulation: a question that names no place gets the national one,
     * the local one's score lowered by LOCAL_PRIOR (0.8). */
    assert_int_equal(retrieve(f, "业主大会定期会议每年召开几次？", &bm25, &h, &err), CQ_OK);
    assert_true(h.n >= 2);
    assert_int_equal(h.hits[0].doc_id, f->national);
    const cq_hit *local = hit_of(&h, f->local), *national = hit_of(&h, f->national);
    assert_true(local->score > 0);
    assert_true(local->score < national->score);
    double ratio = local->score / national->score;
    if (ratio < 0.8 - 1e-9 || ratio > 0.8 + 1e-9) fail_msg("local / national score %.6f, expected 0.8", ratio);
    cq_hits_free(&h);
    /* Naming the place (with or without its 市) keeps the local regulation's score: the tie goes to it. */
    const char *placed[] = {"上海的业主大会定期会议每年召开几次？", "上海市业主大会定期会议每年召开几次？"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(retrieve(f, placed[i], &bm25, &h, &err), CQ_OK);
        assert_int_equal(h.hits[0].doc_id, f->local);
        assert_true(hit_of(&h, f->local)->score == hit_of(&h, f->national)->score);
        cq_hits_free(&h);
    }
}

static void test_k_and_errors(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    cq_hits h;
    /* k 0 is the default; a larger k is no error. */
    assert_int_equal(retrieve(f, "工资 劳动者 会议", NULL, &h, &err), CQ_OK);
    assert_true(h.n <= CQ_RETRIEVE_DEFAULT_K);
    assert_int_equal(h.n, 5);
    cq_hits_free(&h);
    assert_int_equal(retrieve(f, "工资 劳动者 会议", &(cq_retrieve_options){.k = 1000}, &h, &err), CQ_OK);
    assert_int_equal(h.n, 6); /* every clause of the KB */
    cq_hits_free(&h);
    /* Dense without a dense retriever: refused with the reason. */
    assert_int_equal(retrieve(f, "加班", &(cq_retrieve_options){.modes = CQ_RETRIEVE_DENSE}, &h, &err),
                     CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "models/ssm"));
    assert_int_equal(h.n, 0);
    /* A query parsed without a KB cannot be retrieved with. */
    cq_query q;
    assert_int_equal(cq_query_parse(NULL, 0, "加班", &q, &err), CQ_OK);
    assert_int_equal(cq_retrieve(f->s, &q, NULL, &h, &err), CQ_ERR_INVALID);
    cq_query_free(&q);
}

/* A deleted document's clauses are never retrieved (its FTS rows go with it). */
static void test_deleted_document(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    cq_hits h;
    assert_int_equal(cq_store_doc_delete(f->s, f->wages, &err), CQ_OK);
    assert_int_equal(retrieve(f, "加班工资怎么支付？", NULL, &h, &err), CQ_OK);
    assert_true(h.n >= 1);
    for (size_t i = 0; i < h.n; i++) assert_true(h.hits[i].doc_id != f->wages);
    cq_hits_free(&h);
}

/* ---- reranking ---------------------------------------------------------------------------------------------- */

typedef struct {
    size_t calls, seen;
    int fail;
} rerank_probe;

/* Scores a hit by its clause id (higher id, better): the reverse of nothing in particular, so any order change
 * shows. */
static cq_status by_clause_id(void *ctx, const cq_query *q, const cq_hit *hits, size_t n, double *scores,
                              double *relevance, cq_err *err) {
    rerank_probe *p = ctx;
    assert_non_null(q->text);
    p->calls++;
    p->seen = n;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(hits[i].source == CQ_RETRIEVE_ROUTER, 0); /* router hits are not rescored */
        assert_true(isnan(relevance[i])); /* not judged until the reranker says */
        scores[i] = (double)hits[i].clause_id;
        if (i + 1 < n) relevance[i] = -(double)hits[i].clause_id; /* the last one left unjudged */
    }
    return p->fail ? cq_err_set(err, CQ_ERR_INTERNAL, "reranker failed") : CQ_OK;
}

static void test_rerank(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    cq_hits h;
    rerank_probe p = {0};
    /* Top 4 candidates rescored, cut to k = 2: the two with the highest clause ids among the first 4 fused. */
    cq_hits fused;
    assert_int_equal(retrieve(f, "工资 劳动者 会议", &(cq_retrieve_options){.k = 4}, &fused, &err), CQ_OK);
    assert_int_equal(fused.n, 4);
    int64_t best = 0, second = 0;
    const int64_t fourth = fused.hits[3].clause_id;
    for (size_t i = 0; i < 4; i++) {
        int64_t id = fused.hits[i].clause_id;
        if (id > best) second = best, best = id;
        else if (id > second) second = id;
    }
    cq_hits_free(&fused);
    /* The mode without a reranker is an error a person can act on; a reranker without the mode is not called. */
    cq_retrieve_options o = {.modes = CQ_RETRIEVE_HYBRID | CQ_RETRIEVE_RERANK, .k = 2};
    assert_int_equal(retrieve(f, "工资 劳动者 会议", &o, &h, &err), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "adapter"));
    o = (cq_retrieve_options){.k = 2, .rerank = by_clause_id, .rerank_ctx = &p, .rerank_top_n = 4};
    assert_int_equal(retrieve(f, "工资 劳动者 会议", &o, &h, &err), CQ_OK);
    assert_int_equal(p.calls, 0);
    cq_hits_free(&h);
    o.modes = CQ_RETRIEVE_HYBRID | CQ_RETRIEVE_RERANK;
    assert_int_equal(retrieve(f, "工资 劳动者 会议", &o, &h, &err), CQ_OK);
    assert_int_equal(p.calls, 1);
    assert_int_equal(p.seen, 4);
    assert_int_equal(h.n, 2);
    assert_int_equal(h.hits[0].clause_id, best);
    assert_int_equal(h.hits[1].clause_id, second);
    assert_true(h.hits[0].score == (double)best); /* the reranker's score */
    for (size_t i = 0; i < h.n; i++) { /* its judgement, where it gave one: the fourth candidate's it did not */
        assert_int_equal(h.hits[i].reranked, h.hits[i].clause_id != fourth);
        assert_true(h.hits[i].relevance == (h.hits[i].reranked ? -(double)h.hits[i].clause_id : 0));
    }
    cq_hits_free(&h);
    /* Router hits stay first; only what follows them is rescored (top_n 0: k). */
    p = (rerank_probe){0};
    o = (cq_retrieve_options){
        .modes = CQ_RETRIEVE_HYBRID | CQ_RETRIEVE_RERANK, .k = 3, .rerank = by_clause_id, .rerank_ctx = &p};
    assert_int_equal(retrieve(f, "劳动法第三条 工资 会议", &o, &h, &err), CQ_OK);
    assert_int_equal(h.n, 3);
    assert_int_equal(h.hits[0].source, CQ_RETRIEVE_ROUTER);
    assert_string_equal(h.hits[0].label, "第三条");
    assert_false(h.hits[0].reranked);
    assert_int_equal(p.seen, 2);
    assert_true(h.hits[1].clause_id > h.hits[2].clause_id);
    assert_no_duplicates(&h);
    cq_hits_free(&h);
    /* rerank_default (the GPU's default): every question is reranked without the mode, English ones too. */
    p = (rerank_probe){0};
    cq_retrieve_options zh = {.k = 2, .rerank = by_clause_id, .rerank_ctx = &p, .rerank_top_n = 4, .rerank_default = true};
    assert_int_equal(retrieve(f, "工资 劳动者 会议", &zh, &h, &err), CQ_OK);
    assert_int_equal(p.calls, 1);
    cq_hits_free(&h);
    static const char *const payment[][4] = {
        {"7.2", "7.2", "7 Fees > 7.2", "7.2 Payment. The Customer shall pay each invoice within thirty days."},
    };
    test_add_doc(f->s, f->kb, "services-agreement", "Services Agreement", "h5", payment, 1);
    assert_int_equal(retrieve(f, "When must the customer pay an invoice?", &zh, &h, &err), CQ_OK);
    assert_true(h.n > 0);
    assert_int_equal(p.calls, 2);
    zh.rerank_default = false; /* the CPU's default: only when the modes ask for it */
    cq_hits_free(&h);
    assert_int_equal(retrieve(f, "When must the customer pay an invoice?", &zh, &h, &err), CQ_OK);
    assert_int_equal(p.calls, 2);
    cq_hits_free(&h);
    /* A failing reranker fails the retrieval with its reason. */
    p = (rerank_probe){.fail = 1};
    assert_int_equal(retrieve(f, "工资 劳动者 会议", &o, &h, &err), CQ_ERR_INTERNAL);
    assert_string_equal(err.msg, "reranker failed");
    assert_int_equal(h.n, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modes),
        cmocka_unit_test(test_query_text),
        cmocka_unit_test_setup_teardown(test_query_titles, setup_kb, teardown_kb),
        cmocka_unit_test_setup_teardown(test_router_first, setup_kb, teardown_kb),
        cmocka_unit_test_setup_teardown(test_bm25_named_document_first, setup_kb, teardown_kb),
        cmocka_unit_test_setup_teardown(test_local_prior, setup_kb, teardown_kb),
        cmocka_unit_test_setup_teardown(test_k_and_errors, setup_kb, teardown_kb),
        cmocka_unit_test_setup_teardown(test_deleted_document, setup_kb, teardown_kb),
        cmocka_unit_test_setup_teardown(test_rerank, setup_kb, teardown_kb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
