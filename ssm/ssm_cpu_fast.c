/* The fast CPU backend: the reference's math, reorganized for 2-16 cores with AVX2/FMA.
 *
 *   - Projections are matrix products over a block of tokens, with weights packed once into 16-column panels
 *     (P[panel][k][16]) and a 6×16 register-tiled kernel; tasks are (row chunk × panel group).
 *   - Conv, scan and gate run 8 channels to a vector (lanes = channels), one task per 8-channel group, looping
 *     over the block's sequences; the scan state for the group stays in a small L1 array.
 *   - exp/log are vector polynomials (relative error ~2e-7); the unit tests hold this backend to the reference.
 * The encoder checks for AVX2 and FMA before it creates this backend (encoder.c); nothing here runs without them. */
#pragma GCC target("avx2,fma")
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/exp_avx2.h"
#include "ssm/ssm_internal.h"
#include "core/threadpool.h"

#define MR 6   /* rows of a micro-tile */
#define NR 16  /* columns of a panel */
#define ROW_CHUNK 48
#define COL_PANELS 4

/* ---- vector math ---- */

/* natural log for x > 0 (finite, normal) */
static inline __m256 log256(__m256 x) {
    __m256i xi = _mm256_castps_si256(x);
    __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(xi, 23), _mm256_set1_epi32(127)));
    __m256 m = _mm256_castsi256_ps(
        _mm256_or_si256(_mm256_and_si256(xi, _mm256_set1_epi32(0x007FFFFF)), _mm256_set1_epi32(0x3F800000)));
    /* m in [1, 2): fold to [sqrt(1/2), sqrt(2)) */
    __m256 big = _mm256_cmp_ps(m, _mm256_set1_ps(1.41421356f), _CMP_GT_OQ);
    m = _mm256_blendv_ps(m, _mm256_mul_ps(m, _mm256_set1_ps(0.5f)), big);
    e = _mm256_add_ps(e, _mm256_and_ps(big, _mm256_set1_ps(1.0f)));
    /* log(m) = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172 */
    __m256 s = _mm256_div_ps(_mm256_sub_ps(m, _mm256_set1_ps(1.0f)), _mm256_add_ps(m, _mm256_set1_ps(1.0f)));
    __m256 s2 = _mm256_mul_ps(s, s);
    __m256 p = _mm256_set1_ps(2.0f / 9);
    p = _mm256_fmadd_ps(p, s2, _mm256_set1_ps(2.0f / 7));
    p = _mm256_fmadd_ps(p, s2, _mm256_set1_ps(2.0f / 5));
    p = _mm256_fmadd_ps(p, s2, _mm256_set1_ps(2.0f / 3));
    p = _mm256_fmadd_ps(p, s2, _mm256_set1_ps(2.0f));
    return _mm256_fmadd_ps(e, _mm256_set1_ps(0.69314718056f), _mm256_mul_ps(p, s));
}

/* softplus(x) = x for x > 20, else log1p(exp(x)); log1p(u) = log(w) * u / (w - 1) with w = 1 + u keeps small u
 * accurate (w == 1 gives u). */
static inline __m256 softplus256(__m256 x) {
    __m256 u = cq_exp256(x), w = _mm256_add_ps(u, _mm256_set1_ps(1.0f)), wm1 = _mm256_sub_ps(w, _mm256_set1_ps(1.0f));
    __m256 is_one = _mm256_cmp_ps(wm1, _mm256_setzero_ps(), _CMP_EQ_OQ);
    __m256 safe = _mm256_blendv_ps(wm1, _mm256_set1_ps(1.0f), is_one);
    __m256 l = _mm256_blendv_ps(_mm256_mul_ps(log256(w), _mm256_div_ps(u, safe)), u, is_one);
    return _mm256_blendv_ps(l, x, _mm256_cmp_ps(x, _mm256_set1_ps(20.0f), _CMP_GT_OQ));
}

static inline __m256 silu256(__m256 x) {
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), cq_exp256(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

/* ---- packed matrix product ---- */

typedef struct {
    int n, k;       /* W is (n × k) */
    int n_panels;
    float *p;       /* n_panels × k × NR, zero-padded */
} packed_w;

static int pack(packed_w *pw, const float *W, int n, int k, int ldw) {
    pw->n = n;
    pw->k = k;
    pw->n_panels = (n + NR - 1) / NR;
    pw->p = aligned_alloc(32, ((size_t)pw->n_panels * k * NR * sizeof(float) + 31) / 32 * 32);
    if (!pw->p) return 0;
    for (int pi = 0; pi < pw->n_panels; pi++)
        for (int kk = 0; kk < k; kk++)
            for (int j = 0; j < NR; j++) {
                int row = pi * NR + j;
                pw->p[((size_t)pi * k + kk) * NR + j] = row < n ? W[(size_t)row * ldw + kk] : 0.0f;
            }
    return 1;
}

static inline void store_row(float *c, __m256 lo, __m256 hi, int ncols, int accumulate) {
    if (ncols == NR) {
        if (accumulate) {
            lo = _mm256_add_ps(lo, _mm256_loadu_ps(c));
            hi = _mm256_add_ps(hi, _mm256_loadu_ps(c + 8));
        }
        _mm256_storeu_ps(c, lo);
        _mm256_storeu_ps(c + 8, hi);
    } else {
        float tmp[NR];
        _mm256_storeu_ps(tmp, lo);
        _mm256_storeu_ps(tmp + 8, hi);
        for (int j = 0; j < ncols; j++) c[j] = accumulate ? c[j] + tmp[j] : tmp[j];
    }
}

/* C[MR rows, panel cols] (+)= A[MR rows, :] · W^T: twelve accumulators named so that they stay in registers. */
static inline void micro6(const float *A, size_t lda, const float *P, int k, float *C, size_t ldc, int ncols,
                          int accumulate) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
           c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const float *a0 = A, *a1 = A + lda, *a2 = A + 2 * lda, *a3 = A + 3 * lda, *a4 = A + 4 * lda, *a5 = A + 5 * lda;
    for (int kk = 0; kk < k; kk++) {
        __m256 b0 = _mm256_load_ps(P + (size_t)kk * NR), b1 = _mm256_load_ps(P + (size_t)kk * NR + 8), a;
        a = _mm256_broadcast_ss(a0 + kk);
        c00 = _mm256_fmadd_ps(a, b0, c00);
        c01 = _mm256_fmadd_ps(a, b1, c01);
        a = _mm256_broadcast_ss(a1 + kk);
        c10 = _mm256_fmadd_ps(a, b0, c10);
        c11 = _mm256_fmadd_ps(a, b1, c11);
        a = _mm256_broadcast_ss(a2 + kk);
        c20 = _mm256_fmadd_ps(a, b0, c20);
        c21 = _mm256_fmadd_ps(a, b1, c21);
        a = _mm256_broadcast_ss(a3 + kk);
        c30 = _mm256_fmadd_ps(a, b0, c30);
        c31 = _mm256_fmadd_ps(a, b1, c31);
        a = _mm256_broadcast_ss(a4 + kk);
        c40 = _mm256_fmadd_ps(a, b0, c40);
        c41 = _mm256_fmadd_ps(a, b1, c41);
        a = _mm256_broadcast_ss(a5 + kk);
        c50 = _mm256_fmadd_ps(a, b0, c50);
        c51 = _mm256_fmadd_ps(a, b1, c51);
    }
    store_row(C, c00, c01, ncols, accumulate);
    store_row(C + ldc, c10, c11, ncols, accumulate);
    store_row(C + 2 * ldc, c20, c21, ncols, accumulate);
    store_row(C + 3 * ldc, c30, c31, ncols, accumulate);
    store_row(C + 4 * ldc, c40, c41, ncols, accumulate);
    store_row(C + 5 * ldc, c50, c51, ncols, accumulate);
}

/* One row: the edge of a block (same order of sums as micro6, so results do not depend on where edges fall). */
static inline void micro1(const float *A, const float *P, int k, float *C, int ncols, int accumulate) {
    __m256 c0 = _mm256_setzero_ps(), c1 = c0;
    for (int kk = 0; kk < k; kk++) {
        __m256 a = _mm256_broadcast_ss(A + kk);
        c0 = _mm256_fmadd_ps(a, _mm256_load_ps(P + (size_t)kk * NR), c0);
        c1 = _mm256_fmadd_ps(a, _mm256_load_ps(P + (size_t)kk * NR + 8), c1);
    }
    store_row(C, c0, c1, ncols, accumulate);
}

typedef struct {
    const float *A;
    size_t lda, m;
    const packed_w *W;
    float *C;
    size_t ldc;
    int accumulate;
    int n_col_groups;
} gemm_job;

static void gemm_task(void *ctx, int task, int thread) {
    (void)thread;
    const gemm_job *g = ctx;
    size_t r0 = (size_t)(task / g->n_col_groups) * ROW_CHUNK;
    int p0 = (task % g->n_col_groups) * COL_PANELS;
    size_t r1 = r0 + ROW_CHUNK < g->m ? r0 + ROW_CHUNK : g->m;
    int p1 = p0 + COL_PANELS < g->W->n_panels ? p0 + COL_PANELS : g->W->n_panels;
    for (int p = p0; p < p1; p++) {
        const float *P = g->W->p + (size_t)p * g->W->k * NR;
        int ncols = g->W->n - p * NR < NR ? g->W->n - p * NR : NR;
        for (size_t r = r0; r < r1; r += MR) {
            float *C = g->C + r * g->ldc + (size_t)p * NR;
            if (r1 - r >= MR)
                micro6(g->A + r * g->lda, g->lda, P, g->W->k, C, g->ldc, ncols, g->accumulate);
            else
                for (size_t i = r; i < r1; i++, C += g->ldc)
                    micro1(g->A + i * g->lda, P, g->W->k, C, ncols, g->accumulate);
        }
    }
}

/* C (m × n, ldc) (+)= A (m × k, lda) · W^T */
/* ---- the backend ---- */

typedef struct {
    packed_w in_proj, x_proj, dt_proj, out_proj;
    float *A_t;      /* (Di/8, N, 8): -exp(A_log), transposed so 8 channels share a vector */
} mixer_packed;

struct cq_ssm_cpu {
    const cq_ssm_model *m;
    cq_pool *pool;
    int serial; /* this block is too small to share: waking workers costs more than it saves */
    mixer_packed *fwd, *rev;
    packed_w pool_mean, pool_last;
    /* scratch for cap tokens */
    size_t cap;
    float *x, *xn, *xz, *xc, *xdbl, *dt, *y, *tmp, *xr;
    size_t *perm;
    size_t cap_pieces;
    float *psum, *plast;
};

static void parallel(cq_ssm_cpu *c, int n_tasks, cq_pool_fn fn, void *ctx) {
    if (c->serial)
        for (int t = 0; t < n_tasks; t++) fn(ctx, t, 0);
    else
        cq_pool_run(c->pool, n_tasks, fn, ctx);
}

static void gemm(cq_ssm_cpu *c, const float *A, size_t lda, size_t m, const packed_w *W, float *C, size_t ldc,
                 int accumulate) {
    if (!m) return;
    gemm_job g = {.A = A, .lda = lda, .m = m, .W = W, .C = C, .ldc = ldc, .accumulate = accumulate,
                  .n_col_groups = (W->n_panels + COL_PANELS - 1) / COL_PANELS};
    size_t row_chunks = (m + ROW_CHUNK - 1) / ROW_CHUNK;
    parallel(c, (int)(row_chunks * (size_t)g.n_col_groups), gemm_task, &g);
}

static void free_packed(packed_w *p) { free(p->p); }

static void free_mixer(mixer_packed *mp) {
    free_packed(&mp->in_proj);
    free_packed(&mp->x_proj);
    free_packed(&mp->dt_proj);
    free_packed(&mp->out_proj);
    free(mp->A_t);
}

static int pack_mixer(const cq_ssm_model *m, const cq_ssm_mixer_w *w, mixer_packed *mp) {
    const int dm = m->cfg.d_model, Di = m->d_inner, N = m->cfg.d_state, R = m->cfg.dt_rank;
    if (!pack(&mp->in_proj, w->in_proj, 2 * Di, dm, dm) || !pack(&mp->x_proj, w->x_proj, R + 2 * N, Di, Di) ||
        !pack(&mp->dt_proj, w->dt_proj, Di, R, R) || !pack(&mp->out_proj, w->out_proj, dm, Di, Di))
        return 0;
    mp->A_t = aligned_alloc(32, (size_t)Di * N * sizeof(float));
    if (!mp->A_t) return 0;
    for (int g = 0; g < Di / 8; g++)
        for (int n = 0; n < N; n++)
            for (int j = 0; j < 8; j++) mp->A_t[((size_t)g * N + n) * 8 + j] = -expf(w->A_log[(g * 8 + j) * N + n]);
    return 1;
}

void cq_ssm_cpu_free(cq_ssm_cpu *c) {
    if (!c) return;
    for (int l = 0; c->fwd && l < c->m->cfg.n_layer; l++) free_mixer(&c->fwd[l]);
    for (int l = 0; c->rev && l < c->m->cfg.n_layer; l++) free_mixer(&c->rev[l]);
    free(c->fwd);
    free(c->rev);
    free_packed(&c->pool_mean);
    free_packed(&c->pool_last);
    free(c->x);
    free(c->xn);
    free(c->xz);
    free(c->xc);
    free(c->xdbl);
    free(c->dt);
    free(c->y);
    free(c->tmp);
    free(c->xr);
    free(c->perm);
    free(c->psum);
    free(c->plast);
    cq_pool_free(c->pool);
    free(c);
}

cq_status cq_ssm_cpu_new(const cq_ssm_model *m, int n_threads, cq_ssm_cpu **out, cq_err *err) {
    *out = NULL;
    if (m->d_inner % 8)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "fast CPU backend needs d_inner (%d) to be a multiple of 8",
                          m->d_inner);
    cq_ssm_cpu *c = calloc(1, sizeof *c);
    if (!c) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    c->m = m;
    cq_status rc = cq_pool_new(n_threads, &c->pool, err);
    if (rc) {
        free(c);
        return rc;
    }
    const int L = m->cfg.n_layer, dm = m->cfg.d_model, E = m->cfg.d_embed;
    c->fwd = calloc((size_t)L, sizeof *c->fwd);
    c->rev = m->cfg.bidirectional ? calloc((size_t)L, sizeof *c->rev) : NULL;
    int ok = c->fwd && (c->rev || !m->cfg.bidirectional);
    for (int l = 0; ok && l < L; l++) {
        ok = pack_mixer(m, &m->layers[l].fwd, &c->fwd[l]);
        if (ok && c->rev) ok = pack_mixer(m, &m->layers[l].rev, &c->rev[l]);
    }
    ok = ok && pack(&c->pool_mean, m->pool_w, E, dm, 2 * dm) && pack(&c->pool_last, m->pool_w + dm, E, dm, 2 * dm);
    if (!ok) {
        cq_ssm_cpu_free(c);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory packing SSM weights");
    }
    *out = c;
    return CQ_OK;
}

static int ensure_scratch(cq_ssm_cpu *c, size_t T, size_t n_pieces) {
    const size_t dm = (size_t)c->m->cfg.d_model, Di = (size_t)c->m->d_inner, N = (size_t)c->m->cfg.d_state,
                 R = (size_t)c->m->cfg.dt_rank, E = (size_t)c->m->cfg.d_embed;
    if (T > c->cap) {
        size_t cap = T < 256 ? 256 : T;
        float **bufs[] = {&c->x, &c->xn, &c->xz, &c->xc, &c->xdbl, &c->dt, &c->y, &c->tmp, &c->xr};
        size_t widths[] = {dm, dm, 2 * Di, Di, R + 2 * N, Di, Di, dm, dm};
        for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
            free(*bufs[i]);
            *bufs[i] = aligned_alloc(32, (cap * widths[i] * sizeof(float) + 31) / 32 * 32);
            if (!*bufs[i]) {
                c->cap = 0;
                return 0;
            }
        }
        free(c->perm);
        c->perm = malloc(cap * sizeof *c->perm);
        if (!c->perm) {
            c->cap = 0;
            return 0;
        }
        c->cap = cap;
    }
    if (n_pieces > c->cap_pieces) {
        free(c->psum);
        free(c->plast);
        c->psum = malloc(n_pieces * dm * sizeof(float));
        c->plast = malloc(n_pieces * (dm > E ? dm : E) * sizeof(float));
        if (!c->psum || !c->plast) {
            c->cap_pieces = 0;
            return 0;
        }
        c->cap_pieces = n_pieces;
    }
    return 1;
}

typedef struct {
    const float *x;
    const float *w;
    float *y;
    int dm;
    float eps;
    size_t T;
} norm_job;

static void norm_task(void *ctx, int task, int thread) {
    (void)thread;
    const norm_job *j = ctx;
    size_t r0 = (size_t)task * 64, r1 = r0 + 64 < j->T ? r0 + 64 : j->T;
    for (size_t t = r0; t < r1; t++) {
        const float *x = j->x + t * j->dm;
        float *y = j->y + t * j->dm;
        double ss = 0;
        for (int i = 0; i < j->dm; i++) ss += (double)x[i] * x[i];
        float scale = 1.0f / sqrtf((float)(ss / j->dm) + j->eps);
        for (int i = 0; i < j->dm; i++) y[i] = x[i] * scale * j->w[i];
    }
}

static void rmsnorm_rows(cq_ssm_cpu *c, const float *x, const float *w, float *y, size_t T) {
    norm_job j = {.x = x, .w = w, .y = y, .dm = c->m->cfg.d_model, .eps = c->m->cfg.norm_eps, .T = T};
    parallel(c, (int)((T + 63) / 64), norm_task, &j);
}

/* Sequences for one mixer pass: [off[i], off[i+1]) with states (NULL entries: zero, dropped). */
typedef struct {
    const cq_ssm_model *m;
    const cq_ssm_mixer_w *w;
    const mixer_packed *mp;
    int layer;
    size_t n_seq;
    const size_t *off;
    cq_ssm_state *const *states;
    float *xz, *xc, *xdbl, *dt, *y;
} chan_job;

/* Phase 1, per 8-channel group: xc = silu(conv(x) + b), sliding the conv window through each sequence. */
static void conv_task(void *ctx, int task, int thread) {
    (void)thread;
    const chan_job *j = ctx;
    const int Di = j->m->d_inner, K = j->m->cfg.d_conv, c0 = task * 8;
    __m256 w[8], bias = _mm256_setzero_ps();
    float wt[8][8];
    for (int jj = 0; jj < K; jj++)
        for (int l = 0; l < 8; l++) wt[jj][l] = j->w->conv_w[(c0 + l) * K + jj];
    for (int jj = 0; jj < K; jj++) w[jj] = _mm256_loadu_ps(wt[jj]);
    bias = _mm256_loadu_ps(j->w->conv_b + c0);
    for (size_t s = 0; s < j->n_seq; s++) {
        size_t a = j->off[s], e = j->off[s + 1];
        cq_ssm_state *st = j->states ? j->states[s] : NULL;
        float *cs = st ? st->conv + ((size_t)j->layer * Di + c0) * (K - 1) : NULL;
        __m256 win[8]; /* win[0] oldest .. win[K-2] newest */
        for (int jj = 0; jj < K - 1; jj++) {
            float v[8];
            for (int l = 0; l < 8; l++) v[l] = cs ? cs[l * (K - 1) + jj] : 0.0f;
            win[jj] = _mm256_loadu_ps(v);
        }
        for (size_t t = a; t < e; t++) {
            __m256 xt = _mm256_loadu_ps(j->xz + t * 2 * Di + c0);
            __m256 acc = _mm256_fmadd_ps(w[K - 1], xt, bias);
            for (int jj = 0; jj < K - 1; jj++) acc = _mm256_fmadd_ps(w[jj], win[jj], acc);
            _mm256_storeu_ps(j->xc + t * Di + c0, silu256(acc));
            for (int jj = 0; jj + 1 < K - 1; jj++) win[jj] = win[jj + 1];
            if (K > 1) win[K - 2] = xt;
        }
        if (cs)
            for (int jj = 0; jj < K - 1; jj++) {
                float v[8];
                _mm256_storeu_ps(v, win[jj]);
                for (int l = 0; l < 8; l++) cs[l * (K - 1) + jj] = v[l];
            }
    }
}

/* Phase 2, per 8-channel group: the selective scan with the D skip and the SiLU(z) gate.
 *   dt = softplus(dt_raw + bias); h = exp(dt*A) h + dt*x*B_t; y = (C_t · h + D x) * silu(z) */
static void scan_task(void *ctx, int task, int thread) {
    (void)thread;
    const chan_job *j = ctx;
    const int Di = j->m->d_inner, N = j->m->cfg.d_state, R = j->m->cfg.dt_rank, c0 = task * 8;
    const size_t ldx = (size_t)R + 2 * N;
    const float *At = j->mp->A_t + (size_t)task * N * 8;
    const __m256 bias = _mm256_loadu_ps(j->w->dt_bias + c0), D = _mm256_loadu_ps(j->w->D + c0);
    __m256 h[64];
    for (size_t s = 0; s < j->n_seq; s++) {
        size_t a = j->off[s], e = j->off[s + 1];
        cq_ssm_state *st = j->states ? j->states[s] : NULL;
        float *hs = st ? st->h + ((size_t)j->layer * Di + c0) * N : NULL;
        for (int n = 0; n < N; n++) {
            float v[8];
            for (int l = 0; l < 8; l++) v[l] = hs ? hs[l * N + n] : 0.0f;
            h[n] = _mm256_loadu_ps(v);
        }
        for (size_t t = a; t < e; t++) {
            __m256 dt = softplus256(_mm256_add_ps(_mm256_loadu_ps(j->dt + t * Di + c0), bias));
            __m256 x = _mm256_loadu_ps(j->xc + t * Di + c0);
            __m256 dtx = _mm256_mul_ps(dt, x), y = _mm256_mul_ps(D, x);
            const float *B = j->xdbl + t * ldx + R, *C = B + N;
            for (int n = 0; n < N; n++) {
                __m256 dA = cq_exp256(_mm256_mul_ps(dt, _mm256_load_ps(At + n * 8)));
                h[n] = _mm256_fmadd_ps(dA, h[n], _mm256_mul_ps(dtx, _mm256_broadcast_ss(B + n)));
                y = _mm256_fmadd_ps(h[n], _mm256_broadcast_ss(C + n), y);
            }
            __m256 z = _mm256_loadu_ps(j->xz + t * 2 * Di + Di + c0);
            _mm256_storeu_ps(j->y + t * Di + c0, _mm256_mul_ps(y, silu256(z)));
        }
        if (hs)
            for (int n = 0; n < N; n++) {
                float v[8];
                _mm256_storeu_ps(v, h[n]);
                for (int l = 0; l < 8; l++) hs[l * N + n] = v[l];
            }
    }
}

/* out (+)= mixer(xn) over the given sequences. */
static void mixer(cq_ssm_cpu *c, const cq_ssm_mixer_w *w, const mixer_packed *mp, int layer, const float *xn,
                  size_t T, size_t n_seq, const size_t *off, cq_ssm_state *const *states, float *out,
                  int accumulate) {
    const cq_ssm_model *m = c->m;
    const size_t dm = (size_t)m->cfg.d_model, Di = (size_t)m->d_inner, R = (size_t)m->cfg.dt_rank,
                 N = (size_t)m->cfg.d_state;
    gemm(c, xn, dm, T, &mp->in_proj, c->xz, 2 * Di, 0);
    chan_job j = {.m = m, .w = w, .mp = mp, .layer = layer, .n_seq = n_seq, .off = off, .states = states,
                  .xz = c->xz, .xc = c->xc, .xdbl = c->xdbl, .dt = c->dt, .y = c->y};
    parallel(c, (int)(Di / 8), conv_task, &j);
    gemm(c, c->xc, Di, T, &mp->x_proj, c->xdbl, R + 2 * N, 0);
    gemm(c, c->xdbl, R + 2 * N, T, &mp->dt_proj, c->dt, Di, 0);
    parallel(c, (int)(Di / 8), scan_task, &j);
    gemm(c, c->y, Di, T, &mp->out_proj, out, dm, accumulate);
}

cq_status cq_ssm_cpu_forward(cq_ssm_cpu *c, const cq_ssm_block *b, cq_err *err) {
    const cq_ssm_model *m = c->m;
    const size_t dm = (size_t)m->cfg.d_model, T = b->n_tokens, P = b->n_pieces;
    if (m->cfg.d_state > 64)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "fast CPU backend supports d_state up to 64");
    if (!ensure_scratch(c, T, P)) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory for %zu tokens", T);
    c->serial = T < 128;
    cq_status rc = cq_ssm_embed(m, b->tokens, T, c->x, err);
    if (rc) return rc;
    if (m->cfg.bidirectional) /* position t of the reversed layout reads token perm[t] */
        for (size_t p = 0; p < P; p++)
            for (size_t t = b->piece_off[p]; t < b->piece_off[p + 1]; t++)
                c->perm[t] = b->piece_off[p + 1] - 1 - (t - b->piece_off[p]);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        rmsnorm_rows(c, c->x, m->layers[l].norm, c->xn, T);
        mixer(c, &m->layers[l].fwd, &c->fwd[l], l, c->xn, T, b->n_seq, b->seq_off, b->states, c->x, 1);
        if (m->cfg.bidirectional) {
            for (size_t t = 0; t < T; t++) memcpy(c->xr + t * dm, c->xn + c->perm[t] * dm, dm * sizeof(float));
            mixer(c, &m->layers[l].rev, &c->rev[l], l, c->xr, T, P, b->piece_off, NULL, c->tmp, 0);
            for (size_t t = 0; t < T; t++) {
                float *xo = c->x + c->perm[t] * dm;
                const float *r = c->tmp + t * dm;
                for (size_t i = 0; i < dm; i++) xo[i] += r[i];
            }
        }
    }
    rmsnorm_rows(c, c->x, m->norm_f, c->xn, T);
    if (b->outputs) memcpy(b->outputs, c->xn, T * dm * sizeof(float));
    for (size_t p = 0; p < P; p++) {
        float *s = c->psum + p * dm;
        memset(s, 0, dm * sizeof(float));
        for (size_t t = b->piece_off[p]; t < b->piece_off[p + 1]; t++)
            for (size_t i = 0; i < dm; i++) s[i] += c->xn[t * dm + i];
        memcpy(c->plast + p * dm, c->xn + (b->piece_off[p + 1] - 1) * dm, dm * sizeof(float));
    }
    if (b->piece_sum) {
        memcpy(b->piece_sum, c->psum, P * dm * sizeof(float));
        memcpy(b->piece_last, c->plast, P * dm * sizeof(float));
    }
    gemm(c, c->psum, dm, P, &c->pool_mean, b->pool_mean, (size_t)m->cfg.d_embed, 0);
    gemm(c, c->plast, dm, P, &c->pool_last, b->pool_last, (size_t)m->cfg.d_embed, 0);
    return CQ_OK;
}
