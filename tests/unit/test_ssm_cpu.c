/* ssm/: the fast CPU backend against the reference at a mid-size shape and long, blocked documents; the document
 * state (A then B from A's state equals A+B; save and load); query batches; argument checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "ssm/ssm_internal.h"
#include "test_ssm_util.h"

#define TOL 1e-4

typedef struct {
    char dir[128];
    cq_ssm_model *m;
    cq_ssm_encoder *ref, *cpu;
} fixture;

static int setup_model(void **state, bool bidirectional) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/cq_test_ssm_cpu_%d_%d", (int)getpid(), (int)bidirectional);
    cq_ssm_config c = {.vocab_size = CQ_SSM_VOCAB_SIZE, .d_model = 32, .n_layer = 2, .d_state = 16, .d_conv = 4,
                       .expand = 2, .dt_rank = 4, .d_embed = 24, .bidirectional = bidirectional, .norm_eps = 1e-5f};
    cq_err err = {0};
    if (ssm_test_write_model(f->dir, &c, 7, NULL, NULL) || cq_ssm_model_load(f->dir, &f->m, &err) ||
        cq_ssm_encoder_new(f->m, CQ_SSM_BACKEND_REF, 1, &f->ref, &err) ||
        cq_ssm_encoder_new(f->m, CQ_SSM_BACKEND_CPU, 2, &f->cpu, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    *state = f;
    return 0;
}
static int setup_uni(void **state) { return setup_model(state, false); }
static int setup_bidir(void **state) { return setup_model(state, true); }

static int teardown(void **state) {
    fixture *f = *state;
    cq_ssm_encoder_free(f->ref);
    cq_ssm_encoder_free(f->cpu);
    cq_ssm_model_free(f->m);
    ssm_test_rm_model(f->dir);
    free(f);
    return 0;
}

/* A random document of n tokens cut into clauses of 1..max_seg tokens. */
static size_t random_doc(int32_t *tok, uint32_t *ends, size_t n, int max_seg) {
    size_t s = 0, t = 0;
    while (t < n) {
        size_t len = 1 + (size_t)(ssm_test_uniform() * max_seg);
        if (t + len > n) len = n - t;
        for (size_t i = 0; i < len; i++) tok[t + i] = i ? (int32_t)(ssm_test_uniform() * CQ_SSM_VOCAB_SIZE) : CQ_SSM_TOK_SEP;
        t += len;
        ends[s++] = (uint32_t)t;
    }
    return s;
}

static void compare_backends(fixture *f, size_t n, int max_seg) {
    const cq_ssm_config *c = cq_ssm_model_config(f->m);
    int32_t *tok = malloc(n * sizeof *tok);
    uint32_t *ends = malloc(n * sizeof *ends);
    size_t S = random_doc(tok, ends, n, max_seg);
    float *vr = malloc(S * c->d_embed * sizeof(float)), *vc = malloc(S * c->d_embed * sizeof(float));
    float *orf = malloc(n * c->d_model * sizeof(float)), *oc = malloc(n * c->d_model * sizeof(float));
    cq_ssm_state *sr, *sc;
    cq_err err = {0};
    assert_int_equal(cq_ssm_state_new(f->m, &sr, &err), CQ_OK);
    assert_int_equal(cq_ssm_state_new(f->m, &sc, &err), CQ_OK);
    cq_ssm_seq a = {tok, n, ends, S, sr, vr, orf, NULL}, b = {tok, n, ends, S, sc, vc, oc, NULL};
    if (cq_ssm_encode_tokens(f->ref, &a, 1, &err) || cq_ssm_encode_tokens(f->cpu, &b, 1, &err))
        fail_msg("%s", err.msg);
    size_t nh = (size_t)c->n_layer * f->m->d_inner * c->d_state;
    double eo = ssm_test_rel_err(oc, orf, n * c->d_model), ev = ssm_test_rel_err(vc, vr, S * c->d_embed),
           eh = ssm_test_rel_err(sc->h, sr->h, nh);
    if (eo > TOL || ev > TOL || eh > TOL)
        fail_msg("n=%zu: fast vs reference rel err outputs %.2e vectors %.2e h %.2e", n, eo, ev, eh);
    free(tok);
    free(ends);
    free(vr);
    free(vc);
    free(orf);
    free(oc);
    cq_ssm_state_free(sr);
    cq_ssm_state_free(sc);
}

/* odd sizes, a 6-row tile edge, and a document longer than one block (1024) with a clause across the edge */
static void test_fast_matches_reference(void **state) {
    fixture *f = *state;
    size_t sizes[] = {1, 7, 13, 64, 65, 1300};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) compare_backends(f, sizes[i], 40);
    compare_backends(f, 1100, 1060); /* clauses longer than a block */
}

static void test_document_resume(void **state) {
    fixture *f = *state;
    const cq_ssm_config *c = cq_ssm_model_config(f->m);
    const char *clauses[] = {"第一条 为了规范数字经济发展，制定本条例。", "第二条 本条例适用于本省行政区域内的数字经济促进工作。",
                             "Section 7.2 Termination. Either party may terminate this Agreement on 30 days' notice.",
                             "第三条 县级以上人民政府应当加强对数字经济工作的领导。", "", "附则"};
    size_t n = sizeof clauses / sizeof clauses[0], lens[6];
    for (size_t i = 0; i < n; i++) lens[i] = strlen(clauses[i]);
    cq_ssm_encoder *encs[] = {f->ref, f->cpu};
    for (int k = 0; k < 2; k++) {
        cq_ssm_encoder *e = encs[k];
        float *whole = malloc(n * c->d_embed * sizeof(float)), *parts = malloc(n * c->d_embed * sizeof(float));
        cq_ssm_state *s1, *s2;
        cq_err err = {0};
        assert_int_equal(cq_ssm_state_new(f->m, &s1, &err), CQ_OK);
        assert_int_equal(cq_ssm_encode_document(e, s1, clauses, lens, n, whole, &err), CQ_OK);
        /* A (2 clauses), save, load, then B (the rest) */
        assert_int_equal(cq_ssm_state_new(f->m, &s2, &err), CQ_OK);
        assert_int_equal(cq_ssm_encode_document(e, s2, clauses, lens, 2, parts, &err), CQ_OK);
        size_t sz = cq_ssm_state_size_bytes(f->m);
        unsigned char *blob = malloc(sz);
        assert_int_equal(cq_ssm_state_save(s2, blob, sz, &err), CQ_OK);
        assert_int_not_equal(cq_ssm_state_save(s2, blob, sz - 1, &err), CQ_OK);
        cq_ssm_state_free(s2);
        assert_int_equal(cq_ssm_state_load(f->m, blob, sz, &s2, &err), CQ_OK);
        assert_int_equal(cq_ssm_encode_document(e, s2, clauses + 2, lens + 2, n - 2, parts + 2 * c->d_embed, &err),
                         CQ_OK);
        double ev = ssm_test_rel_err(parts, whole, n * c->d_embed);
        size_t nh = (size_t)c->n_layer * f->m->d_inner * c->d_state;
        double eh = ssm_test_rel_err(s2->h, s1->h, nh);
        if (ev > 1e-5 || eh > 1e-5) fail_msg("backend %d: resumed vs whole rel err vectors %.2e h %.2e", k, ev, eh);
        assert_int_equal(cq_ssm_state_tokens(s1), cq_ssm_state_tokens(s2));
        /* each vector is unit length */
        for (size_t i = 0; i < n; i++) {
            double nn = 0;
            for (int r = 0; r < c->d_embed; r++) nn += (double)whole[i * c->d_embed + r] * whole[i * c->d_embed + r];
            assert_true(fabs(nn - 1) < 1e-5);
        }
        /* a corrupted or foreign blob is refused */
        blob[0] = 'X';
        cq_ssm_state *bad = NULL;
        assert_int_equal(cq_ssm_state_load(f->m, blob, sz, &bad, &err), CQ_ERR_FORMAT);
        blob[0] = 'C';
        blob[8] ^= 1; /* fingerprint */
        assert_int_equal(cq_ssm_state_load(f->m, blob, sz, &bad, &err), CQ_ERR_INVALID);
        assert_non_null(strstr(err.msg, "another model shape"));
        assert_int_equal(cq_ssm_state_load(f->m, blob, 10, &bad, &err), CQ_ERR_FORMAT);
        assert_null(bad);
        free(blob);
        free(whole);
        free(parts);
        cq_ssm_state_free(s1);
        cq_ssm_state_free(s2);
    }
}

static void test_query_batch(void **state) {
    fixture *f = *state;
    const cq_ssm_config *c = cq_ssm_model_config(f->m);
    enum { NQ = 300 };
    char *q[NQ];
    size_t lens[NQ];
    for (int i = 0; i < NQ; i++) {
        q[i] = malloc(64);
        snprintf(q[i], 64, i % 2 ? "员工加班费怎么算 %d" : "What does Section %d say?", i);
        lens[i] = strlen(q[i]);
    }
    float *batch = malloc(NQ * c->d_embed * sizeof(float)), *one = malloc(c->d_embed * sizeof(float)),
          *ref = malloc(c->d_embed * sizeof(float));
    cq_err err = {0};
    assert_int_equal(cq_ssm_encode_queries(f->cpu, (const char *const *)q, lens, NQ, batch, &err), CQ_OK);
    for (int i = 0; i < NQ; i += 37) {
        assert_int_equal(cq_ssm_encode_queries(f->cpu, (const char *const *)&q[i], &lens[i], 1, one, &err), CQ_OK);
        assert_int_equal(cq_ssm_encode_queries(f->ref, (const char *const *)&q[i], &lens[i], 1, ref, &err), CQ_OK);
        assert_true(ssm_test_rel_err(batch + i * c->d_embed, one, c->d_embed) < 1e-5);
        assert_true(ssm_test_rel_err(one, ref, c->d_embed) < TOL);
    }
    /* a question differs from the same text read as a clause, and different questions differ */
    assert_true(ssm_test_rel_err(batch, batch + 2 * c->d_embed, c->d_embed) > 1e-3);
    for (int i = 0; i < NQ; i++) free(q[i]);
    free(batch);
    free(one);
    free(ref);
}

static void test_bad_arguments(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    int32_t tok[3] = {5, 40000, 6};
    uint32_t ends[2] = {2, 3};
    float v[2 * 64];
    cq_ssm_seq s = {tok, 3, ends, 2, NULL, v, NULL, NULL};
    assert_int_equal(cq_ssm_encode_tokens(f->cpu, &s, 1, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "outside the vocabulary"));
    tok[1] = 7;
    ends[0] = 3;
    assert_int_equal(cq_ssm_encode_tokens(f->cpu, &s, 1, &err), CQ_ERR_INVALID);
    ends[0] = 1;
    ends[1] = 2;
    assert_int_equal(cq_ssm_encode_tokens(f->cpu, &s, 1, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "last segment"));
    ends[1] = 3;
    assert_int_equal(cq_ssm_encode_tokens(f->cpu, &s, 1, &err), CQ_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fast_matches_reference, setup_uni, teardown),
        cmocka_unit_test_setup_teardown(test_fast_matches_reference, setup_bidir, teardown),
        cmocka_unit_test_setup_teardown(test_document_resume, setup_uni, teardown),
        cmocka_unit_test_setup_teardown(test_document_resume, setup_bidir, teardown),
        cmocka_unit_test_setup_teardown(test_query_batch, setup_uni, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup_uni, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
