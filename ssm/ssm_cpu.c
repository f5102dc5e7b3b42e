/* The reference forward: one token at a time, plain loops, one thread. Every other backend is tested against it,
 * and it is tested against the PyTorch reference in tools/ssm_ref/ (tests/unit/test_ssm_ref.c). Slow on purpose. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ssm/ssm_internal.h"

/* y = x / sqrt(mean(x^2) + eps) * w */
static void rmsnorm(const float *x, const float *w, int n, float eps, float *y) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
}

/* y (rows) = W (rows × cols) · x (cols) */
static void matvec(const float *W, const float *x, int rows, int cols, float *y) {
    for (int r = 0; r < rows; r++) {
        float acc = 0;
        for (int c = 0; c < cols; c++) acc += W[(size_t)r * cols + c] * x[c];
        y[r] = acc;
    }
}

typedef struct {
    float *xz, *xc, *xdbl, *dt, *y, *out;
} ref_scratch;

/* Runs one direction of a mixer over the tokens idx[0..n) in scan order, from conv (Di × (K-1)) and h (Di × N),
 * which it updates, adding out_proj(y) for token idx[i] to acc[idx[i]]. */
static void mixer_run(const cq_ssm_model *m, const cq_ssm_mixer_w *w, const float *xn, const size_t *idx, size_t n,
                      float *conv, float *h, float *acc, ref_scratch *s) {
    const int dm = m->cfg.d_model, Di = m->d_inner, N = m->cfg.d_state, K = m->cfg.d_conv, R = m->cfg.dt_rank;
    for (size_t i = 0; i < n; i++) {
        const size_t t = idx[i];
        matvec(w->in_proj, xn + t * dm, 2 * Di, dm, s->xz);
        const float *x = s->xz, *z = s->xz + Di;
        /* causal depthwise conv over [conv window, x_t], then SiLU; the window slides by one */
        for (int c = 0; c < Di; c++) {
            float *win = conv + (size_t)c * (K - 1);
            float a = w->conv_b[c];
            for (int j = 0; j < K - 1; j++) a += w->conv_w[c * K + j] * win[j];
            a += w->conv_w[c * K + K - 1] * x[c];
            s->xc[c] = cq_ssm_silu(a);
            for (int j = 0; j + 1 < K - 1; j++) win[j] = win[j + 1];
            if (K > 1) win[K - 2] = x[c];
        }
        matvec(w->x_proj, s->xc, R + 2 * N, Di, s->xdbl);
        const float *dt_low = s->xdbl, *B = s->xdbl + R, *C = s->xdbl + R + N;
        matvec(w->dt_proj, dt_low, Di, R, s->dt);
        for (int c = 0; c < Di; c++) {
            float dt = cq_ssm_softplus(s->dt[c] + w->dt_bias[c]);
            float yc = 0;
            for (int k = 0; k < N; k++) {
                float A = -expf(w->A_log[c * N + k]);
                float *hk = &h[(size_t)c * N + k];
                *hk = expf(dt * A) * *hk + dt * B[k] * s->xc[c];
                yc += C[k] * *hk;
            }
            yc += w->D[c] * s->xc[c];
            s->y[c] = yc * cq_ssm_silu(z[c]);
        }
        matvec(w->out_proj, s->y, dm, Di, s->out);
        for (int c = 0; c < dm; c++) acc[t * dm + c] += s->out[c];
    }
}

cq_status cq_ssm_ref_forward(const cq_ssm_model *m, const cq_ssm_block *b, cq_err *err) {
    const cq_ssm_config *cfg = &m->cfg;
    const int dm = cfg->d_model, Di = m->d_inner, N = cfg->d_state, K = cfg->d_conv, E = cfg->d_embed;
    const size_t T = b->n_tokens;
    float *x = calloc(T * dm + 1, sizeof *x), *xn = calloc(T * dm + 1, sizeof *xn);
    size_t *idx = malloc((T + 1) * sizeof *idx);
    float *conv0 = calloc((size_t)Di * K + 1, sizeof *conv0), *h0 = calloc((size_t)Di * N, sizeof *h0);
    ref_scratch s = {
        .xz = malloc(2 * Di * sizeof(float)), .xc = malloc(Di * sizeof(float)),
        .xdbl = malloc((cfg->dt_rank + 2 * N) * sizeof(float)), .dt = malloc(Di * sizeof(float)),
        .y = malloc(Di * sizeof(float)), .out = malloc(dm * sizeof(float)),
    };
    cq_status rc = CQ_OK;
    if (!x || !xn || !idx || !conv0 || !h0 || !s.xz || !s.xc || !s.xdbl || !s.dt || !s.y || !s.out) {
        rc = cq_err_set(err, CQ_ERR_NOMEM, "ssm reference: out of memory for %zu tokens", T);
        goto done;
    }
    if ((rc = cq_ssm_embed(m, b->tokens, T, x, err))) goto done;

    for (int l = 0; l < cfg->n_layer; l++) {
        const cq_ssm_layer_w *L = &m->layers[l];
        for (size_t t = 0; t < T; t++) rmsnorm(x + t * dm, L->norm, dm, cfg->norm_eps, xn + t * dm);
        /* residual: x += mixer_fwd(xn) (+ mixer_rev(xn)); both read xn, so accumulate straight into x */
        for (size_t q = 0; q < b->n_seq; q++) {
            size_t a = b->seq_off[q], e = b->seq_off[q + 1];
            cq_ssm_state *st = b->states[q];
            float *conv = conv0, *h = h0;
            if (st) {
                conv = st->conv + (size_t)l * Di * (K - 1);
                h = st->h + (size_t)l * Di * N;
            } else {
                memset(conv0, 0, (size_t)Di * K * sizeof(float));
                memset(h0, 0, (size_t)Di * N * sizeof(float));
            }
            for (size_t t = a; t < e; t++) idx[t - a] = t;
            mixer_run(m, &L->fwd, xn, idx, e - a, conv, h, x, &s);
        }
        if (cfg->bidirectional) {
            for (size_t p = 0; p < b->n_pieces; p++) {
                size_t a = b->piece_off[p], e = b->piece_off[p + 1];
                memset(conv0, 0, (size_t)Di * K * sizeof(float));
                memset(h0, 0, (size_t)Di * N * sizeof(float));
                for (size_t t = a; t < e; t++) idx[t - a] = e - 1 - (t - a);
                mixer_run(m, &L->rev, xn, idx, e - a, conv0, h0, x, &s);
            }
        }
    }
    for (size_t t = 0; t < T; t++) rmsnorm(x + t * dm, m->norm_f, dm, cfg->norm_eps, xn + t * dm);
    if (b->outputs) memcpy(b->outputs, xn, T * dm * sizeof(float));
    for (size_t p = 0; b->piece_sum && p < b->n_pieces; p++) {
        size_t a = b->piece_off[p], e = b->piece_off[p + 1];
        for (int c = 0; c < dm; c++) {
            float sum = 0;
            for (size_t t = a; t < e; t++) sum += xn[t * dm + c];
            b->piece_sum[p * dm + c] = sum;
            b->piece_last[p * dm + c] = xn[(e - 1) * dm + c];
        }
    }

    for (size_t p = 0; p < b->n_pieces; p++) {
        size_t a = b->piece_off[p], e = b->piece_off[p + 1];
        for (int r = 0; r < E; r++) {
            const float *wm = m->pool_w + (size_t)r * 2 * dm, *wl = wm + dm;
            float pm = 0, pl = 0;
            for (size_t t = a; t < e; t++)
                for (int c = 0; c < dm; c++) pm += wm[c] * xn[t * dm + c];
            for (int c = 0; c < dm; c++) pl += wl[c] * xn[(e - 1) * dm + c];
            b->pool_mean[p * E + r] = pm;
            b->pool_last[p * E + r] = pl;
        }
    }
done:
    free(x);
    free(xn);
    free(idx);
    free(conv0);
    free(h0);
    free(s.xz);
    free(s.xc);
    free(s.xdbl);
    free(s.dt);
    free(s.y);
    free(s.out);
    return rc;
}
