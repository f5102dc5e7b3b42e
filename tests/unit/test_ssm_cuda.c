/* ssm/: the CUDA backend against its CPU twin (the fast CPU backend, itself held to the reference and to PyTorch)
 * at the production shape and at odd lengths: 1, 7, a scan chunk (256) ± 1, several chunks, a batch of questions,
 * state carried across calls, and the bidirectional option. Tolerance: fp32 both sides, max|gpu − cpu| / max|cpu|
 * ≤ 1e-4 per tensor. Without a GPU (or a CUDA build) every test says so and passes. */
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
    cq_ssm_encoder *cpu, *gpu; /* gpu NULL: skip */
} fixture;

/* Whether this build and machine run the CUDA backend, asked of a tiny model (the production one takes seconds
 * to write, which a skipped test should not spend). */
static int cuda_available(const char *dir) {
    cq_ssm_config tiny = {.vocab_size = 64, .d_model = 8, .n_layer = 1, .d_state = 4, .d_conv = 4, .expand = 2,
                          .dt_rank = 2, .d_embed = 8, .norm_eps = 1e-5f};
    cq_err err = {0};
    cq_ssm_model *m = NULL;
    cq_ssm_encoder *e = NULL;
    int ok = !ssm_test_write_model(dir, &tiny, 1, NULL, NULL) && !cq_ssm_model_load(dir, &m, &err) &&
             !cq_ssm_encoder_new(m, CQ_SSM_BACKEND_CUDA, 0, &e, &err);
    if (!ok) printf("[  SKIP    ] CUDA backend not available (%s): CUDA kernel tests skipped\n", err.msg);
    cq_ssm_encoder_free(e);
    cq_ssm_model_free(m);
    ssm_test_rm_model(dir);
    return ok;
}

static int setup_model(void **state, bool bidirectional) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/cq_test_ssm_cuda_%d_%d", (int)getpid(), (int)bidirectional);
    *state = f;
    if (!cuda_available(f->dir)) return 0;
    /* the production shape (docs/SSM.md) */
    cq_ssm_config c = {.vocab_size = CQ_SSM_VOCAB_SIZE, .d_model = 192, .n_layer = 4, .d_state = 16, .d_conv = 4,
                       .expand = 2, .dt_rank = 12, .d_embed = 256, .bidirectional = bidirectional,
                       .norm_eps = 1e-5f};
    cq_err err = {0};
    if (ssm_test_write_model(f->dir, &c, 11, NULL, NULL) || cq_ssm_model_load(f->dir, &f->m, &err) ||
        cq_ssm_encoder_new(f->m, CQ_SSM_BACKEND_CPU, 0, &f->cpu, &err) ||
        cq_ssm_encoder_new(f->m, CQ_SSM_BACKEND_CUDA, 0, &f->gpu, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    return 0;
}
static int setup_uni(void **state) { return setup_model(state, false); }
static int setup_bidir(void **state) { return setup_model(state, true); }

static int teardown(void **state) {
    fixture *f = *state;
    cq_ssm_encoder_free(f->cpu);
    cq_ssm_encoder_free(f->gpu);
    cq_ssm_model_free(f->m);
    if (f->m) ssm_test_rm_model(f->dir);
    free(f);
    return 0;
}

static void check(const char *what, size_t n, const float *gpu, const float *cpu, size_t count) {
    double e = ssm_test_rel_err(gpu, cpu, count);
    if (e > TOL) fail_msg("%s (n=%zu): GPU vs CPU rel err %.2e > %.0e", what, n, e, TOL);
}

/* One document of n tokens in clauses of up to max_seg tokens, encoded as `parts` calls carrying the state. */
static void compare_doc(fixture *f, size_t n, int max_seg, int parts) {
    const cq_ssm_config *c = cq_ssm_model_config(f->m);
    int32_t *tok = malloc(n * sizeof *tok);
    uint32_t *ends = malloc(n * sizeof *ends);
    size_t S = 0;
    for (size_t t = 0; t < n;) {
        size_t len = 1 + (size_t)(ssm_test_uniform() * max_seg);
        if (t + len > n) len = n - t;
        for (size_t i = 0; i < len; i++) tok[t + i] = (int32_t)(ssm_test_uniform() * CQ_SSM_VOCAB_SIZE);
        t += len;
        ends[S++] = (uint32_t)t;
    }
    float *v[2], *o[2];
    cq_ssm_state *st[2];
    cq_ssm_encoder *enc[2] = {f->cpu, f->gpu};
    cq_err err = {0};
    for (int k = 0; k < 2; k++) {
        v[k] = malloc(S * c->d_embed * sizeof(float));
        o[k] = malloc(n * c->d_model * sizeof(float));
        assert_int_equal(cq_ssm_state_new(f->m, &st[k], &err), CQ_OK);
        size_t seg0 = 0;
        for (int p = 0; p < parts; p++) { /* cut at segment ends, roughly evenly */
            size_t seg1 = p + 1 == parts ? S : S * (size_t)(p + 1) / (size_t)parts;
            if (seg1 <= seg0) continue;
            size_t t0 = seg0 ? ends[seg0 - 1] : 0;
            uint32_t *e2 = malloc((seg1 - seg0) * sizeof *e2);
            for (size_t s = seg0; s < seg1; s++) e2[s - seg0] = ends[s] - (uint32_t)t0;
            cq_ssm_seq q = {tok + t0, ends[seg1 - 1] - t0, e2, seg1 - seg0, st[k], v[k] + seg0 * c->d_embed,
                            o[k] + t0 * c->d_model, NULL};
            if (cq_ssm_encode_tokens(enc[k], &q, 1, &err)) fail_msg("%s", err.msg);
            free(e2);
            seg0 = seg1;
        }
    }
    size_t nc = (size_t)c->n_layer * f->m->d_inner * (c->d_conv - 1), nh = (size_t)c->n_layer * f->m->d_inner * c->d_state;
    check("outputs", n, o[1], o[0], n * c->d_model);
    check("vectors", n, v[1], v[0], S * c->d_embed);
    check("conv state", n, st[1]->conv, st[0]->conv, nc);
    check("scan state", n, st[1]->h, st[0]->h, nh);
    assert_int_equal(st[1]->n_tokens, (int64_t)n);
    for (int k = 0; k < 2; k++) {
        free(v[k]);
        free(o[k]);
        cq_ssm_state_free(st[k]);
    }
    free(tok);
    free(ends);
}

static void test_documents(void **state) {
    fixture *f = *state;
    if (!f->gpu) return;
    size_t sizes[] = {1, 7, 255, 256, 257, 3001};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) compare_doc(f, sizes[i], 60, 1);
    compare_doc(f, 2000, 700, 1); /* clauses that span chunks */
    compare_doc(f, 1500, 50, 3);  /* state carried across calls */
}

static void test_query_batch(void **state) {
    fixture *f = *state;
    if (!f->gpu) return;
    const cq_ssm_config *c = cq_ssm_model_config(f->m);
    enum { NQ = 500 };
    char *q[NQ];
    size_t lens[NQ];
    for (int i = 0; i < NQ; i++) {
        q[i] = malloc(128);
        snprintf(q[i], 128, i % 3 ? "第%d条规定的申报条件有哪些？" : "What does Section %d.2 say about termination?", i);
        lens[i] = strlen(q[i]);
    }
    float *vc = malloc(NQ * c->d_embed * sizeof(float)), *vg = malloc(NQ * c->d_embed * sizeof(float));
    cq_err err = {0};
    assert_int_equal(cq_ssm_encode_queries(f->cpu, (const char *const *)q, lens, NQ, vc, &err), CQ_OK);
    if (cq_ssm_encode_queries(f->gpu, (const char *const *)q, lens, NQ, vg, &err)) fail_msg("%s", err.msg);
    check("query vectors", NQ, vg, vc, NQ * c->d_embed);
    for (int i = 0; i < NQ; i++) free(q[i]);
    free(vc);
    free(vg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_documents, setup_uni, teardown),
        cmocka_unit_test_setup_teardown(test_query_batch, setup_uni, teardown),
        cmocka_unit_test_setup_teardown(test_documents, setup_bidir, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
