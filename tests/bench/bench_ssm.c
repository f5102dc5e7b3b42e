/* SSM encoder benchmarks (docs/PERF.md, "SSM encoder"). Prints a table; not a test.
 *
 *   bench_ssm [cpu] [gpu] [faiss] [shape=DxL ...]   (default: cpu faiss, plus gpu when a GPU is present)
 *
 * shape=DxL  the encoder shape to time instead of the production one: d_model D, L layers (d_state 16, expand 2,
 *            dt_rank ceil(D/16), d_embed 256); several shape= run one after the other (issue 14's width/depth
 *            choice, docs/SSM.md "Sizes")
 *
 * cpu    fast CPU backend at the production shape (random weights): tokens/s on a 30,000-token document, query
 *        encoding latency P50/P95 (one question at a time)
 * gpu    CUDA backend: tokens/s on a 150,000-token document and on batches of 1,024 questions; the scan kernel's
 *        achieved bandwidth against a device-to-device copy
 * faiss  FAISS as search/vectors.c uses it: search latency P50/P95 up to 150,000 unit vectors of 256, flat and
 *        IVF (random vectors; a query is a stored vector plus noise, cosine ≈ 0.9: does its source come back?) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <faiss/c_api/IndexIVF_c.h>
#include <faiss/c_api/Index_c.h>
#include <omp.h>
#include <faiss/c_api/index_factory_c.h>

#include "core/clock.h"
#include "search/vectors.h"
#include "ssm/ssm_internal.h"
#include "../unit/test_ssm_util.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p) {
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)ceil(p * n) - 1;
    return v[i < n ? i : n - 1];
}

static cq_ssm_config production = {.vocab_size = CQ_SSM_VOCAB_SIZE, .d_model = 192, .n_layer = 4,
                                         .d_state = 16, .d_conv = 4, .expand = 2, .dt_rank = 12, .d_embed = 256,
                                         .norm_eps = 1e-5f};

/* a document of n tokens in clauses of 60 tokens (SEP + random ids) */
static size_t make_doc(int32_t *tok, uint32_t *ends, size_t n) {
    size_t S = 0;
    for (size_t t = 0; t < n; t++) {
        tok[t] = t % 60 == 0 ? CQ_SSM_TOK_SEP : (int32_t)(ssm_test_uniform() * CQ_SSM_VOCAB_SIZE);
        if (t % 60 == 59 || t + 1 == n) ends[S++] = (uint32_t)(t + 1);
    }
    return S;
}

static double doc_tokens_per_s(cq_ssm_encoder *e, const cq_ssm_model *m, size_t n, int reps) {
    int32_t *tok = malloc(n * sizeof *tok);
    uint32_t *ends = malloc(n * sizeof *ends);
    size_t S = make_doc(tok, ends, n);
    float *v = malloc(S * m->cfg.d_embed * sizeof(float));
    cq_err err = {0};
    double best = 1e30;
    for (int r = -1; r < reps; r++) { /* r = -1 warms up */
        cq_ssm_state *st;
        cq_ssm_state_new(m, &st, &err);
        cq_ssm_seq s = {tok, n, ends, S, st, v, NULL, NULL};
        double t0 = cq_clock_seconds();
        if (cq_ssm_encode_tokens(e, &s, 1, &err)) fprintf(stderr, "encode: %s\n", err.msg);
        double dt = cq_clock_seconds() - t0;
        if (r >= 0 && dt < best) best = dt;
        cq_ssm_state_free(st);
    }
    free(tok);
    free(ends);
    free(v);
    return n / best;
}

static const char *questions[] = {"《XX省数字经济促进条例》第三章第十二条规定的申报条件有哪些？",
                                  "What does Section 7.2 say about termination?", "员工加班费怎么算？",
                                  "劳动合同期满后用人单位不续签需要支付经济补偿吗", "Which law governs this agreement?"};

static void bench_cpu(const cq_ssm_model *m) {
    cq_err err = {0};
    cq_ssm_encoder *e;
    printf("\n## SSM encoder, CPU (fast backend, %ld online CPUs)\n\n", sysconf(_SC_NPROCESSORS_ONLN));
    printf("| what | threads | figure |\n|---|---|---|\n");
    for (int threads = 1; threads <= 2; threads++) {
        if (cq_ssm_encoder_new(m, CQ_SSM_BACKEND_CPU, threads, &e, &err)) {
            printf("CPU backend: %s\n", err.msg);
            return;
        }
        printf("| document, 30,000 tokens | %d | %.0f tokens/s |\n", threads, doc_tokens_per_s(e, m, 30000, 3));
        fflush(stdout);
        if (threads == 2) {
            enum { NQ = 400 };
            double lat[NQ];
            float v[256];
            size_t tokens = 0;
            for (int i = 0; i < NQ; i++) {
                const char *q = questions[i % 5];
                size_t len = strlen(q);
                int32_t ids[256];
                tokens += cq_ssm_tokenize(q, len, ids, 256) + 1;
                double t0 = cq_clock_seconds();
                cq_ssm_encode_queries(e, &q, &len, 1, v, &err);
                lat[i] = (cq_clock_seconds() - t0) * 1e3;
            }
            printf("| one question (%.0f tokens avg), latency P50 / P95 | %d | %.2f / %.2f ms |\n",
                   (double)tokens / NQ, threads, pct(lat, NQ, 0.5), pct(lat, NQ, 0.95));
        }
        cq_ssm_encoder_free(e);
    }
}

static void bench_gpu(const cq_ssm_model *m) {
    cq_err err = {0};
    cq_ssm_encoder *e;
    printf("\n## SSM encoder, GPU\n\n");
    if (cq_ssm_encoder_new(m, CQ_SSM_BACKEND_CUDA, 0, &e, &err)) {
        printf("CUDA backend: %s\n", err.msg);
        return;
    }
    printf("| what | figure |\n|---|---|\n");
    printf("| document, 150,000 tokens (clauses of 60) | %.0f tokens/s |\n", doc_tokens_per_s(e, m, 150000, 5));
    fflush(stdout);
    enum { NQ = 1024 };
    const char *qs[NQ];
    size_t lens[NQ], tokens = 0;
    for (int i = 0; i < NQ; i++) {
        qs[i] = questions[i % 5];
        lens[i] = strlen(qs[i]);
        int32_t ids[256];
        tokens += cq_ssm_tokenize(qs[i], lens[i], ids, 256) + 1;
    }
    float *v = malloc(NQ * 256 * sizeof(float));
    double best = 1e30;
    for (int r = -1; r < 10; r++) {
        double t0 = cq_clock_seconds();
        if (cq_ssm_encode_queries(e, qs, lens, NQ, v, &err)) printf("queries: %s\n", err.msg);
        double dt = cq_clock_seconds() - t0;
        if (r >= 0 && dt < best) best = dt;
    }
    printf("| 1,024 questions (%zu tokens) per batch | %.2f ms, %.0f tokens/s |\n", tokens, best * 1e3,
           tokens / best);
    double lat[50];
    for (int i = 0; i < 50; i++) {
        double t0 = cq_clock_seconds();
        cq_ssm_encode_queries(e, &qs[i % 5], &lens[i % 5], 1, v, &err);
        lat[i] = (cq_clock_seconds() - t0) * 1e3;
    }
    printf("| one question, latency P50 / P95 | %.2f / %.2f ms |\n", pct(lat, 50, 0.5), pct(lat, 50, 0.95));
    double scan_ms, scan_gbps, copy_gbps;
    if (cq_ssm_cuda_bench_scan(cq_ssm_encoder_cuda(e), 150000, &scan_ms, &scan_gbps, &copy_gbps, &err))
        printf("scan bench: %s\n", err.msg);
    else
        printf("| scan kernel (3 passes, 150,000 tokens, one layer) | %.3f ms, %.0f GB/s = %.0f %% of copy (%.0f GB/s) |\n",
               scan_ms, scan_gbps, 100 * scan_gbps / copy_gbps, copy_gbps);
    free(v);
    cq_ssm_encoder_free(e);
}

/* FAISS as search/vectors.c builds it: one query at a time, as retrieval asks. */
static void search_latency(FaissIndex *idx, const float *q, int nq, double *p50, double *p95) {
    double *lat = malloc(nq * sizeof *lat);
    float d[10];
    idx_t l[10];
    for (int i = 0; i < nq; i++) {
        double t0 = cq_clock_seconds();
        faiss_Index_search(idx, 1, q + (size_t)i * 256, 10, d, l);
        lat[i] = (cq_clock_seconds() - t0) * 1e3;
    }
    *p50 = pct(lat, nq, 0.5);
    *p95 = pct(lat, nq, 0.95);
    free(lat);
}

static void bench_faiss(void) {
    enum { DIM = 256, NMAX = 150000, NQ = 300 };
    omp_set_num_threads(1); /* as search/vectors.c searches; training uses the same one thread */
    printf("\n## Vector search (FAISS, one query, k = 10, %d-dim unit vectors, random data)\n\n", DIM);
    printf("| index | vectors | build | P50 | P95 | source in top 10 |\n|---|---|---|---|---|---|\n");
    float *x = malloc((size_t)NMAX * DIM * sizeof(float)), *q = malloc((size_t)NQ * DIM * sizeof(float));
    idx_t *ids = malloc(NMAX * sizeof *ids);
    for (size_t i = 0; i < NMAX; i++) {
        double n2 = 0;
        for (int j = 0; j < DIM; j++) {
            x[i * DIM + j] = ssm_test_normal();
            n2 += (double)x[i * DIM + j] * x[i * DIM + j];
        }
        for (int j = 0; j < DIM; j++) x[i * DIM + j] /= (float)sqrt(n2);
        ids[i] = (idx_t)i + 1000;
    }
    idx_t src[NQ];
    for (int i = 0; i < NQ; i++) { /* queries near stored vectors, as real questions are near their clauses */
        src[i] = (idx_t)(ssm_test_uniform() * NMAX);
        const float *base = x + (size_t)src[i] * DIM;
        double n2 = 0;
        for (int j = 0; j < DIM; j++) {
            q[i * DIM + j] = base[j] + 0.5f / 16 * ssm_test_normal(); /* cosine to its source ≈ 0.9 */
            n2 += (double)q[i * DIM + j] * q[i * DIM + j];
        }
        for (int j = 0; j < DIM; j++) q[i * DIM + j] /= (float)sqrt(n2);
    }
    size_t sizes[] = {10000, 20000, 50000, NMAX};
    FaissIndex *flat = NULL;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        if (flat) faiss_Index_free(flat);
        faiss_index_factory(&flat, DIM, CQ_VECTORS_FLAT_SPEC, METRIC_INNER_PRODUCT);
        double t0 = cq_clock_seconds();
        faiss_Index_add_with_ids(flat, (idx_t)sizes[s], x, ids);
        double build = cq_clock_seconds() - t0, p50, p95;
        search_latency(flat, q, NQ, &p50, &p95);
        printf("| flat | %zu | %.2f s | %.2f ms | %.2f ms | — |\n", sizes[s], build, p50, p95);
        fflush(stdout);
    }
    int nlist, nprobe;
    cq_vectors_ivf_shape(NMAX, &nlist, &nprobe);
    char spec[64];
    snprintf(spec, sizeof spec, "IVF%d,Flat", nlist);
    FaissIndex *ivf = NULL;
    faiss_index_factory(&ivf, DIM, spec, METRIC_INNER_PRODUCT);
    double t0 = cq_clock_seconds();
    faiss_Index_train(ivf, NMAX, x);
    faiss_Index_add_with_ids(ivf, NMAX, x, ids);
    double build = cq_clock_seconds() - t0;
    for (int probes = nprobe / 2; probes <= 2 * nprobe; probes *= 2) {
        double p50, p95;
        faiss_IndexIVF_set_nprobe(faiss_IndexIVF_cast(ivf), (size_t)probes);
        search_latency(ivf, q, NQ, &p50, &p95);
        size_t hit = 0; /* random data has no true neighbours but the query's source: recall of the source */
        for (int i = 0; i < NQ; i++) {
            float d[10];
            idx_t b[10];
            faiss_Index_search(ivf, 1, q + (size_t)i * DIM, 10, d, b);
            for (int w = 0; w < 10; w++) hit += b[w] == src[i] + 1000;
        }
        printf("| %s, nprobe %d | %d | %.1f s (train + add) | %.2f ms | %.2f ms | %.3f |\n", spec, probes, NMAX, build,
               p50, p95, hit / (double)NQ);
    }
    faiss_Index_free(flat);
    faiss_Index_free(ivf);
    free(x);
    free(q);
    free(ids);
}

static int run_shape(const cq_ssm_config *c, int cpu, int gpu) {
    char dir[128];
    snprintf(dir, sizeof dir, "/tmp/cq_bench_ssm_%d", (int)getpid());
    cq_ssm_model *m = NULL;
    cq_err err = {0};
    if (ssm_test_write_model(dir, c, 3, NULL, NULL) || cq_ssm_model_load(dir, &m, &err)) {
        fprintf(stderr, "model: %s\n", err.msg);
        return 1;
    }
    printf("# bench_ssm: d_model %d, %d layers, d_state %d, d_embed %d\n", c->d_model, c->n_layer, c->d_state,
           c->d_embed);
    if (cpu) bench_cpu(m);
    if (gpu) bench_gpu(m);
    cq_ssm_model_free(m);
    ssm_test_rm_model(dir);
    return 0;
}

int main(int argc, char **argv) {
    int cpu = 0, gpu = 0, faiss = 0, n_shapes = 0, modes = 0;
    cq_ssm_config shapes[16];
    for (int i = 1; i < argc; i++) {
        int d, l;
        if (!strcmp(argv[i], "cpu")) cpu = modes = 1;
        else if (!strcmp(argv[i], "gpu")) gpu = modes = 1;
        else if (!strcmp(argv[i], "faiss")) faiss = modes = 1;
        else if (sscanf(argv[i], "shape=%dx%d", &d, &l) == 2 && n_shapes < 16 && d >= 8 && d % 8 == 0 && l >= 1) {
            shapes[n_shapes] = production;
            shapes[n_shapes].d_model = d;
            shapes[n_shapes].n_layer = l;
            shapes[n_shapes++].dt_rank = (d + 15) / 16;
        } else {
            fprintf(stderr, "usage: bench_ssm [cpu] [gpu] [faiss] [shape=DxL ...]\n");
            return 2;
        }
    }
    if (!modes) cpu = gpu = faiss = 1;
    if (!n_shapes) shapes[n_shapes++] = production;
    for (int i = 0; i < n_shapes && (cpu || gpu); i++)
        if (run_shape(&shapes[i], cpu, gpu)) return 1;
    if (faiss) bench_faiss();
    return 0;
}
