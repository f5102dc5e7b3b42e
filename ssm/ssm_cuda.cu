/* The CUDA backend: the reference's math on the GPU (docs/SSM.md, "Backends").
 *
 * Per block of packed sequences: embedding gather → per layer { RMSNorm → in_proj (cuBLAS) → causal conv + SiLU
 * → x_proj, dt_proj (cuBLAS) → chunked selective scan (3 passes) with softplus, D skip and SiLU(z) fused →
 * out_proj (cuBLAS, accumulated into the residual) } → RMSNorm → per-piece pooling sums → pool halves (cuBLAS).
 *
 * The scan: one thread per channel holds its N states in registers; a thread block covers 128 channels of one
 * chunk (≤ CHUNK tokens of one sequence) with that chunk's B and C staged in shared memory.
 *   pass 1  every chunk from h = 0: writes the chunk's end state and its total decay Π exp(Δ·A)
 *   pass 2  per sequence, chains chunk boundaries: H_{k+1} = decay_k ⊙ H_k + end_k (H_0 = the sequence's state)
 *   pass 3  every chunk from H_k: writes y = (C·h + D x) ⊙ SiLU(z)
 * Only chunk-boundary states touch global memory. Every function here has its twin in ssm_cpu.c, and
 * tests/unit/test_ssm_cuda.c compares them. */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "core/error.h" /* a C header: its functions keep C linkage */
}
#include "ssm/ssm_internal.h"
#include "core/cuda_check.h"

#define CHUNK 256
#define SCAN_THREADS 128

/* ---- kernels ---- */

__device__ __forceinline__ float silu_d(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplus_d(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

__global__ void embed_kernel(const int32_t *tokens, const float *emb, float *x, size_t T, int d) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < T * d) x[i] = emb[(size_t)tokens[i / d] * d + i % d];
}

/* one warp per row: y = x / sqrt(mean(x²) + eps) · w */
__global__ void rmsnorm_kernel(const float *x, const float *w, float *y, size_t T, int d, float eps) {
    size_t row = blockIdx.x * (size_t)(blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= T) return;
    const float *xr = x + row * d;
    float ss = 0;
    for (int i = lane; i < d; i += 32) ss += xr[i] * xr[i];
    for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    float scale = rsqrtf(ss / d + eps);
    for (int i = lane; i < d; i += 32) y[row * d + i] = xr[i] * scale * w[i];
}

/* xc[t,c] = silu(b[c] + Σ_j w[c,j] · x[t-K+1+j, c]); inputs before the sequence's first token come from its conv
 * window (slot ≥ 0) or are zero. x is the first half of xz (row stride 2·Di). */
__global__ void conv_kernel(const float *xz, const float *w, const float *b, const int *tok_seq,
                            const size_t *seq_off, const int *seq_slot, const float *conv_state, size_t slot_stride,
                            float *xc, size_t T, int Di, int K) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= T * Di) return;
    size_t t = i / Di;
    int c = (int)(i % Di);
    int s = tok_seq[t];
    size_t start = seq_off[s];
    int slot = seq_slot[s];
    float acc = b[c];
    for (int j = 0; j < K; j++) {
        long src = (long)t - K + 1 + j;
        float v;
        if (src >= (long)start)
            v = xz[(size_t)src * 2 * Di + c];
        else if (slot >= 0)
            v = conv_state[slot * slot_stride + (size_t)c * (K - 1) + (K - 1) - ((long)start - src)];
        else
            v = 0.0f;
        acc += w[c * K + j] * v;
    }
    xc[i] = silu_d(acc);
}

/* After conv_kernel: each stateful sequence's window becomes its last K-1 inputs. */
__global__ void conv_state_kernel(const float *xz, const size_t *seq_off, const int *seq_slot, size_t n_seq,
                                  float *conv_state, size_t slot_stride, int Di, int K) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n_seq * Di) return;
    size_t s = i / Di;
    int c = (int)(i % Di), slot = seq_slot[s];
    if (slot < 0 || K < 2) return;
    float *win = conv_state + slot * slot_stride + (size_t)c * (K - 1);
    float nw[8];
    long start = (long)seq_off[s], end = (long)seq_off[s + 1];
    for (int j = 0; j < K - 1; j++) {
        long p = end - (K - 1) + j;
        nw[j] = p >= start ? xz[(size_t)p * 2 * Di + c] : win[(K - 1) - (start - p)];
    }
    for (int j = 0; j < K - 1; j++) win[j] = nw[j];
}

/* The chunked scan; PASS 1 from zero writing (end state, decay), PASS 3 from h_start writing y. */
template <int N, int PASS>
__global__ void scan_kernel(const size_t *chunk_off, const float *xc, const float *dt_raw, const float *dt_bias,
                            const float *A, const float *D, const float *xdbl, int ldx, int R, const float *xz,
                            int Di, float *chunk_end, float *chunk_decay, const float *h_start, float *y) {
    __shared__ float Bs[CHUNK][N], Cs[CHUNK][N];
    const size_t k = blockIdx.x, t0 = chunk_off[k], len = chunk_off[k + 1] - t0;
    for (size_t i = threadIdx.x; i < len * N; i += blockDim.x) {
        size_t t = i / N;
        int n = (int)(i % N);
        Bs[t][n] = xdbl[(t0 + t) * ldx + R + n];
        Cs[t][n] = xdbl[(t0 + t) * ldx + R + N + n];
    }
    __syncthreads();
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= Di) return;
    float a[N], h[N], decay[N];
    const size_t hoff = (k * Di + c) * N;
#pragma unroll
    for (int n = 0; n < N; n++) {
        a[n] = A[c * N + n];
        h[n] = PASS == 1 ? 0.0f : h_start[hoff + n];
        decay[n] = 1.0f;
    }
    const float bias = dt_bias[c], d_skip = D[c];
    for (size_t t = 0; t < len; t++) {
        const size_t row = t0 + t;
        float dt = softplus_d(dt_raw[row * Di + c] + bias), x = xc[row * Di + c], dtx = dt * x;
        float acc = d_skip * x;
#pragma unroll
        for (int n = 0; n < N; n++) {
            float dA = __expf(dt * a[n]); /* ex2.approx: ~2 ulp, well inside the 1e-4 the tests hold */
            h[n] = dA * h[n] + dtx * Bs[t][n];
            if (PASS == 1)
                decay[n] *= dA;
            else
                acc += h[n] * Cs[t][n];
        }
        if (PASS == 3) y[row * Di + c] = acc * silu_d(xz[row * 2 * Di + Di + c]);
    }
    if (PASS == 1) {
#pragma unroll
        for (int n = 0; n < N; n++) {
            chunk_end[hoff + n] = h[n];
            chunk_decay[hoff + n] = decay[n];
        }
    }
}

/* Pass 2: per (sequence, channel, state), walk the sequence's chunks: h_start_k, and the final state into its slot. */
__global__ void scan_chain_kernel(const size_t *seq_chunk_off, const int *seq_slot, size_t n_seq, int Di, int N,
                                  const float *chunk_end, const float *chunk_decay, float *h_start, float *h_state,
                                  size_t slot_stride) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n_seq * Di * N) return;
    size_t s = i / ((size_t)Di * N), cn = i % ((size_t)Di * N);
    int slot = seq_slot[s];
    float H = slot >= 0 ? h_state[slot * slot_stride + cn] : 0.0f;
    for (size_t k = seq_chunk_off[s]; k < seq_chunk_off[s + 1]; k++) {
        size_t o = k * Di * N + cn;
        h_start[o] = H;
        H = chunk_decay[o] * H + chunk_end[o];
    }
    if (slot >= 0) h_state[slot * slot_stride + cn] = H;
}

__global__ void gather_rows_kernel(const float *src, const size_t *perm, float *dst, size_t T, int d) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < T * d) dst[i] = src[perm[i / d] * d + i % d];
}

/* dst[perm[t]] += src[t] */
__global__ void scatter_add_rows_kernel(const float *src, const size_t *perm, float *dst, size_t T, int d) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < T * d) dst[perm[i / d] * d + i % d] += src[i];
}

/* per piece: the sum of its outputs and its last output */
__global__ void pool_sums_kernel(const float *o, const size_t *piece_off, int d, float *psum, float *plast) {
    size_t p = blockIdx.x, a = piece_off[p], e = piece_off[p + 1];
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        float s = 0;
        for (size_t t = a; t < e; t++) s += o[t * d + i];
        psum[p * d + i] = s;
        plast[p * d + i] = o[(e - 1) * d + i];
    }
}

/* ---- host side ---- */

typedef struct {
    float *in_proj, *conv_w, *conv_b, *x_proj, *dt_proj, *dt_bias, *A, *D, *out_proj;
} dev_mixer;

/* Device copies of one layout (sequences, their chunks) */
typedef struct {
    size_t n_seq, n_chunks, cap_seq, cap_chunks, cap_T;
    size_t *seq_off, *chunk_off, *seq_chunk_off; /* device */
    int *seq_slot, *tok_seq;                     /* device */
} dev_layout;

struct cq_ssm_cuda {
    const cq_ssm_model *m;
    cublasHandle_t blas;
    cudaStream_t stream;
    float *emb, *norm_f, *pool_w; /* emb: the built-in table; NULL with an external vocabulary */
    float **norm;
    float *host_x;                 /* external vocabulary: the input rows, made on the host (cq_ssm_embed) */
    size_t cap_host_x;
    dev_mixer *fwd, *rev;
    /* scratch, for cap tokens */
    size_t cap, cap_pieces, cap_chunks, cap_slots;
    int32_t *tokens;
    float *x, *xn, *xz, *xc, *xdbl, *dt, *y, *tmp, *xr;
    size_t *perm, *piece_off;
    float *chunk_end, *chunk_decay, *h_start;
    float *conv_state, *h_state; /* slots × n_layer × (Di×(K-1) | Di×N) */
    float *psum, *plast, *pool_mean, *pool_last;
    dev_layout fwd_l, rev_l;
};

static cq_status upload(const float *src, size_t n, float **dst, cq_err *err) {
    CUDA_TRY(cudaMalloc((void **)dst, n * sizeof(float) + 4));
    CUDA_TRY(cudaMemcpy(*dst, src, n * sizeof(float), cudaMemcpyHostToDevice));
    return CQ_OK;
}

static cq_status upload_mixer(const cq_ssm_model *m, const cq_ssm_mixer_w *w, dev_mixer *d, cq_err *err) {
    const size_t dm = m->cfg.d_model, Di = m->d_inner, N = m->cfg.d_state, R = m->cfg.dt_rank, K = m->cfg.d_conv;
    float *A = (float *)malloc(Di * N * sizeof(float));
    if (!A) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < Di * N; i++) A[i] = -expf(w->A_log[i]);
    cq_status rc = upload(A, Di * N, &d->A, err);
    free(A);
    if (rc || (rc = upload(w->in_proj, 2 * Di * dm, &d->in_proj, err)) ||
        (rc = upload(w->conv_w, Di * K, &d->conv_w, err)) || (rc = upload(w->conv_b, Di, &d->conv_b, err)) ||
        (rc = upload(w->x_proj, (R + 2 * N) * Di, &d->x_proj, err)) ||
        (rc = upload(w->dt_proj, Di * R, &d->dt_proj, err)) || (rc = upload(w->dt_bias, Di, &d->dt_bias, err)) ||
        (rc = upload(w->D, Di, &d->D, err)) || (rc = upload(w->out_proj, dm * Di, &d->out_proj, err)))
        return rc;
    return CQ_OK;
}

static void free_mixer(dev_mixer *d) {
    float *p[] = {d->in_proj, d->conv_w, d->conv_b, d->x_proj, d->dt_proj, d->dt_bias, d->A, d->D, d->out_proj};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) cudaFree(p[i]);
}

static void free_layout(dev_layout *l) {
    cudaFree(l->seq_off);
    cudaFree(l->chunk_off);
    cudaFree(l->seq_chunk_off);
    cudaFree(l->seq_slot);
    cudaFree(l->tok_seq);
}

extern "C" void cq_ssm_cuda_free(cq_ssm_cuda *c) {
    if (!c) return;
    const int L = c->m->cfg.n_layer;
    for (int l = 0; c->fwd && l < L; l++) free_mixer(&c->fwd[l]);
    for (int l = 0; c->rev && l < L; l++) free_mixer(&c->rev[l]);
    for (int l = 0; c->norm && l < L; l++) cudaFree(c->norm[l]);
    free(c->fwd);
    free(c->rev);
    free(c->norm);
    free(c->host_x);
    void *bufs[] = {c->emb, c->norm_f, c->pool_w, c->tokens, c->x, c->xn, c->xz, c->xc, c->xdbl, c->dt, c->y,
                    c->tmp, c->xr, c->perm, c->piece_off, c->chunk_end, c->chunk_decay, c->h_start, c->conv_state,
                    c->h_state, c->psum, c->plast, c->pool_mean, c->pool_last};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    free_layout(&c->fwd_l);
    free_layout(&c->rev_l);
    if (c->blas) cublasDestroy(c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

extern "C" size_t cq_ssm_cuda_block_tokens(const cq_ssm_cuda *c) {
    (void)c;
    return (size_t)1 << 18;
}

extern "C" cq_status cq_ssm_cuda_new(const cq_ssm_model *m, cq_ssm_cuda **out, cq_err *err) {
    *out = NULL;
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
        cudaGetLastError();
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "no CUDA device");
    }
    const int N = m->cfg.d_state;
    if (N != 4 && N != 8 && N != 16)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "CUDA backend supports d_state 4, 8 or 16 (model has %d)", N);
    if (m->cfg.d_conv > 8) return cq_err_set(err, CQ_ERR_UNSUPPORTED, "CUDA backend supports d_conv up to 8");
    cq_ssm_cuda *c = (cq_ssm_cuda *)calloc(1, sizeof *c);
    if (!c) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    c->m = m;
    const int L = m->cfg.n_layer;
    const size_t dm = m->cfg.d_model;
    c->fwd = (dev_mixer *)calloc(L, sizeof *c->fwd);
    c->rev = m->cfg.bidirectional ? (dev_mixer *)calloc(L, sizeof *c->rev) : NULL;
    c->norm = (float **)calloc(L, sizeof *c->norm);
    cq_status rc = CQ_OK;
    if (!c->fwd || !c->norm || (m->cfg.bidirectional && !c->rev)) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc && cudaStreamCreate(&c->stream) != cudaSuccess) rc = cq_err_set(err, CQ_ERR_DEVICE, "cudaStreamCreate failed");
    if (!rc && cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS) {
        c->blas = NULL;
        rc = cq_err_set(err, CQ_ERR_DEVICE, "cublasCreate failed");
    }
    if (!rc && (cublasSetStream(c->blas, c->stream) != CUBLAS_STATUS_SUCCESS ||
                cublasSetMathMode(c->blas, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS))
        rc = cq_err_set(err, CQ_ERR_DEVICE, "cuBLAS set-up failed");
    if (!rc && m->embedding) rc = upload(m->embedding, (size_t)m->cfg.vocab_size * dm, &c->emb, err);
    if (!rc) rc = upload(m->norm_f, dm, &c->norm_f, err);
    if (!rc) rc = upload(m->pool_w, (size_t)m->cfg.d_embed * 2 * dm, &c->pool_w, err);
    for (int l = 0; !rc && l < L; l++) {
        rc = upload(m->layers[l].norm, dm, &c->norm[l], err);
        if (!rc) rc = upload_mixer(m, &m->layers[l].fwd, &c->fwd[l], err);
        if (!rc && c->rev) rc = upload_mixer(m, &m->layers[l].rev, &c->rev[l], err);
    }
    if (rc) {
        cq_ssm_cuda_free(c);
        return rc;
    }
    *out = c;
    return CQ_OK;
}

static cq_status grow_dev(void **p, size_t *cap, size_t need, size_t elem, cq_err *err) {
    if (need <= *cap && *p) return CQ_OK;
    size_t n = need < 64 ? 64 : need;
    cudaFree(*p);
    *p = NULL;
    *cap = 0;
    CUDA_TRY(cudaMalloc(p, n * elem));
    *cap = n;
    return CQ_OK;
}

static cq_status ensure_scratch(cq_ssm_cuda *c, size_t T, size_t P, cq_err *err) {
    const cq_ssm_model *m = c->m;
    const size_t dm = m->cfg.d_model, Di = m->d_inner, N = m->cfg.d_state, R = m->cfg.dt_rank,
                 E = m->cfg.d_embed;
    if (T > c->cap) {
        size_t cap = T < 1024 ? 1024 : T, dummy;
        struct {
            void **p;
            size_t w;
        } bufs[] = {{(void **)&c->x, dm},  {(void **)&c->xn, dm},         {(void **)&c->xz, 2 * Di},
                    {(void **)&c->xc, Di}, {(void **)&c->xdbl, R + 2 * N}, {(void **)&c->dt, Di},
                    {(void **)&c->y, Di},  {(void **)&c->tmp, dm},        {(void **)&c->xr, dm}};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
            dummy = 0;
            cq_status rc = grow_dev(bufs[i].p, &dummy, cap * bufs[i].w, sizeof(float), err);
            if (rc) return rc;
        }
        dummy = 0;
        cq_status rc = grow_dev((void **)&c->tokens, &dummy, cap, sizeof(int32_t), err);
        if (!rc) {
            dummy = 0;
            rc = grow_dev((void **)&c->perm, &dummy, cap, sizeof(size_t), err);
        }
        if (rc) return rc;
        c->cap = cap;
    }
    if (P > c->cap_pieces) {
        size_t cap = P < 64 ? 64 : P, dummy = 0;
        cq_status rc = grow_dev((void **)&c->piece_off, &dummy, cap + 1, sizeof(size_t), err);
        void **bufs[] = {(void **)&c->psum, (void **)&c->plast};
        for (int i = 0; !rc && i < 2; i++) {
            dummy = 0;
            rc = grow_dev(bufs[i], &dummy, cap * dm, sizeof(float), err);
        }
        void **ebufs[] = {(void **)&c->pool_mean, (void **)&c->pool_last};
        for (int i = 0; !rc && i < 2; i++) {
            dummy = 0;
            rc = grow_dev(ebufs[i], &dummy, cap * E, sizeof(float), err);
        }
        if (rc) return rc;
        c->cap_pieces = cap;
    }
    return CQ_OK;
}

/* Builds and uploads a layout: sequences [off[i], off[i+1]) with slots, cut into chunks. */
static cq_status upload_layout(cq_ssm_cuda *c, dev_layout *l, size_t T, size_t n_seq, const size_t *off,
                               const int *slots, cq_err *err) {
    size_t n_chunks = 0;
    for (size_t s = 0; s < n_seq; s++) n_chunks += (off[s + 1] - off[s] + CHUNK - 1) / CHUNK;
    size_t *chunk_off = (size_t *)malloc((n_chunks + 1) * sizeof(size_t));
    size_t *seq_chunk_off = (size_t *)malloc((n_seq + 1) * sizeof(size_t));
    int *tok_seq = (int *)malloc((T + 1) * sizeof(int));
    if (!chunk_off || !seq_chunk_off || !tok_seq) {
        free(chunk_off);
        free(seq_chunk_off);
        free(tok_seq);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t s = 0; s < n_seq; s++) {
        seq_chunk_off[s] = k;
        for (size_t t = off[s]; t < off[s + 1]; t += CHUNK) chunk_off[k++] = t;
        for (size_t t = off[s]; t < off[s + 1]; t++) tok_seq[t] = (int)s;
    }
    seq_chunk_off[n_seq] = k;
    chunk_off[k] = T;
    cq_status rc = CQ_OK;
    size_t cap;
    cap = l->cap_seq;
    if (!rc) rc = grow_dev((void **)&l->seq_off, &cap, n_seq + 1, sizeof(size_t), err);
    cap = l->cap_seq;
    if (!rc) rc = grow_dev((void **)&l->seq_chunk_off, &cap, n_seq + 1, sizeof(size_t), err);
    cap = l->cap_seq;
    if (!rc) rc = grow_dev((void **)&l->seq_slot, &cap, n_seq + 1, sizeof(int), err);
    if (!rc) l->cap_seq = cap;
    cap = l->cap_chunks;
    if (!rc) rc = grow_dev((void **)&l->chunk_off, &cap, n_chunks + 1, sizeof(size_t), err);
    if (!rc) l->cap_chunks = cap;
    cap = l->cap_T;
    if (!rc) rc = grow_dev((void **)&l->tok_seq, &cap, T + 1, sizeof(int), err);
    if (!rc) l->cap_T = cap;
    if (!rc) {
        cudaStream_t st = c->stream;
        if (cudaMemcpyAsync(l->seq_off, off, (n_seq + 1) * sizeof(size_t), cudaMemcpyHostToDevice, st) ||
            cudaMemcpyAsync(l->seq_chunk_off, seq_chunk_off, (n_seq + 1) * sizeof(size_t), cudaMemcpyHostToDevice,
                            st) ||
            cudaMemcpyAsync(l->seq_slot, slots, n_seq * sizeof(int), cudaMemcpyHostToDevice, st) ||
            cudaMemcpyAsync(l->chunk_off, chunk_off, (n_chunks + 1) * sizeof(size_t), cudaMemcpyHostToDevice, st) ||
            cudaMemcpyAsync(l->tok_seq, tok_seq, T * sizeof(int), cudaMemcpyHostToDevice, st) ||
            cudaStreamSynchronize(st))
            rc = cq_err_set(err, CQ_ERR_DEVICE, "uploading a block layout failed: %s",
                            cudaGetErrorString(cudaGetLastError()));
    }
    l->n_seq = n_seq;
    l->n_chunks = n_chunks;
    free(chunk_off);
    free(seq_chunk_off);
    free(tok_seq);
    return rc;
}

/* C (m × n, row stride ldc) = A (m × k, lda) · W^T with W (n × k, ldw); beta 1 accumulates. Row-major through
 * cuBLAS's column-major view: C^T = W · A^T. */
static cq_status gemm(cq_ssm_cuda *c, const float *A, int lda, size_t m, const float *W, int ldw, int n, int k,
                      float *C, int ldc, float beta, cq_err *err) {
    if (!m) return CQ_OK;
    const float one = 1.0f;
    CUBLAS_TRY(cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, (int)m, k, &one, W, ldw, A, lda, &beta, C, ldc));
    return CQ_OK;
}

static unsigned blocks_for(size_t n, unsigned threads) { return (unsigned)((n + threads - 1) / threads); }

template <int N>
static void launch_scan(cq_ssm_cuda *c, const dev_layout *l, const dev_mixer *w, int pass) {
    const cq_ssm_model *m = c->m;
    const int Di = m->d_inner, R = m->cfg.dt_rank, ldx = R + 2 * N;
    dim3 grid((unsigned)l->n_chunks, blocks_for(Di, SCAN_THREADS));
    if (pass == 1)
        scan_kernel<N, 1><<<grid, SCAN_THREADS, 0, c->stream>>>(l->chunk_off, c->xc, c->dt, w->dt_bias, w->A, w->D,
                                                                c->xdbl, ldx, R, c->xz, Di, c->chunk_end,
                                                                c->chunk_decay, NULL, NULL);
    else
        scan_kernel<N, 3><<<grid, SCAN_THREADS, 0, c->stream>>>(l->chunk_off, c->xc, c->dt, w->dt_bias, w->A, w->D,
                                                                c->xdbl, ldx, R, c->xz, Di, NULL, NULL, c->h_start,
                                                                c->y);
}

static void scan_pass(cq_ssm_cuda *c, const dev_layout *l, const dev_mixer *w, int pass) {
    switch (c->m->cfg.d_state) {
    case 4: launch_scan<4>(c, l, w, pass); break;
    case 8: launch_scan<8>(c, l, w, pass); break;
    default: launch_scan<16>(c, l, w, pass); break;
    }
}

/* out (+)= mixer(xn) over layout l; conv/h state slots at layer `layer` (NULL slots: none). */
static cq_status mixer(cq_ssm_cuda *c, const dev_mixer *w, const dev_layout *l, int layer, const float *xn,
                       size_t T, float *out, float beta, cq_err *err) {
    const cq_ssm_model *m = c->m;
    const int dm = m->cfg.d_model, Di = m->d_inner, N = m->cfg.d_state, R = m->cfg.dt_rank, K = m->cfg.d_conv;
    const size_t L = m->cfg.n_layer, conv_stride = L * Di * (K - 1), h_stride = L * Di * N;
    float *conv_state = c->conv_state ? c->conv_state + layer * (size_t)Di * (K - 1) : NULL;
    float *h_state = c->h_state ? c->h_state + layer * (size_t)Di * N : NULL;
    cq_status rc = gemm(c, xn, dm, T, w->in_proj, dm, 2 * Di, dm, c->xz, 2 * Di, 0.0f, err);
    if (rc) return rc;
    conv_kernel<<<blocks_for(T * Di, 256), 256, 0, c->stream>>>(c->xz, w->conv_w, w->conv_b, l->tok_seq, l->seq_off,
                                                                l->seq_slot, conv_state, conv_stride, c->xc, T, Di,
                                                                K);
    conv_state_kernel<<<blocks_for(l->n_seq * Di, 256), 256, 0, c->stream>>>(c->xz, l->seq_off, l->seq_slot,
                                                                             l->n_seq, conv_state, conv_stride, Di,
                                                                             K);
    if ((rc = gemm(c, c->xc, Di, T, w->x_proj, Di, R + 2 * N, Di, c->xdbl, R + 2 * N, 0.0f, err)) ||
        (rc = gemm(c, c->xdbl, R + 2 * N, T, w->dt_proj, R, Di, R, c->dt, Di, 0.0f, err)))
        return rc;
    scan_pass(c, l, w, 1);
    scan_chain_kernel<<<blocks_for(l->n_seq * Di * N, 256), 256, 0, c->stream>>>(
        l->seq_chunk_off, l->seq_slot, l->n_seq, Di, N, c->chunk_end, c->chunk_decay, c->h_start, h_state, h_stride);
    scan_pass(c, l, w, 3);
    CUDA_TRY(cudaGetLastError());
    return gemm(c, c->y, Di, T, w->out_proj, Di, dm, Di, out, dm, beta, err);
}

extern "C" cq_status cq_ssm_cuda_forward(cq_ssm_cuda *c, const cq_ssm_block *b, cq_err *err) {
    const cq_ssm_model *m = c->m;
    const size_t dm = m->cfg.d_model, Di = m->d_inner, N = m->cfg.d_state, K = m->cfg.d_conv, E = m->cfg.d_embed,
                 L = m->cfg.n_layer, T = b->n_tokens, P = b->n_pieces;
    cq_status rc = ensure_scratch(c, T, P, err);
    if (rc) return rc;
    /* state slots: one per stateful sequence */
    int *slots = (int *)malloc((b->n_seq + 1) * sizeof(int)), *no_slots = (int *)malloc((P + 1) * sizeof(int));
    if (!slots || !no_slots) {
        free(slots);
        free(no_slots);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    size_t n_slots = 0;
    for (size_t s = 0; s < b->n_seq; s++) slots[s] = b->states[s] ? (int)n_slots++ : -1;
    for (size_t p = 0; p < P; p++) no_slots[p] = -1;
    const size_t conv_per = L * Di * (K - 1), h_per = L * Di * N;
    size_t cap = c->cap_slots;
    if (n_slots > c->cap_slots) {
        cap = 0;
        rc = grow_dev((void **)&c->conv_state, &cap, n_slots * conv_per + 1, sizeof(float), err);
        cap = 0;
        if (!rc) rc = grow_dev((void **)&c->h_state, &cap, n_slots * h_per, sizeof(float), err);
        if (!rc) c->cap_slots = n_slots;
    }
    for (size_t s = 0; !rc && s < b->n_seq; s++)
        if (slots[s] >= 0 &&
            (cudaMemcpyAsync(c->conv_state + slots[s] * conv_per, b->states[s]->conv, conv_per * sizeof(float),
                             cudaMemcpyHostToDevice, c->stream) ||
             cudaMemcpyAsync(c->h_state + slots[s] * h_per, b->states[s]->h, h_per * sizeof(float),
                             cudaMemcpyHostToDevice, c->stream)))
            rc = cq_err_set(err, CQ_ERR_DEVICE, "uploading states failed");
    if (!rc) rc = upload_layout(c, &c->fwd_l, T, b->n_seq, b->seq_off, slots, err);
    if (!rc && m->cfg.bidirectional) rc = upload_layout(c, &c->rev_l, T, P, b->piece_off, no_slots, err);
    /* chunk scratch for the larger layout */
    size_t n_chunks = c->fwd_l.n_chunks > c->rev_l.n_chunks || !m->cfg.bidirectional ? c->fwd_l.n_chunks
                                                                                      : c->rev_l.n_chunks;
    if (!rc && n_chunks > c->cap_chunks) {
        size_t cc = 0;
        rc = grow_dev((void **)&c->chunk_end, &cc, n_chunks * Di * N, sizeof(float), err);
        cc = 0;
        if (!rc) rc = grow_dev((void **)&c->chunk_decay, &cc, n_chunks * Di * N, sizeof(float), err);
        cc = 0;
        if (!rc) rc = grow_dev((void **)&c->h_start, &cc, n_chunks * Di * N, sizeof(float), err);
        if (!rc) c->cap_chunks = n_chunks;
    }
    size_t *perm = NULL;
    if (!rc && m->cfg.bidirectional) {
        perm = (size_t *)malloc(T * sizeof(size_t));
        if (!perm) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        for (size_t p = 0; !rc && p < P; p++)
            for (size_t t = b->piece_off[p]; t < b->piece_off[p + 1]; t++)
                perm[t] = b->piece_off[p + 1] - 1 - (t - b->piece_off[p]);
        if (!rc && cudaMemcpyAsync(c->perm, perm, T * sizeof(size_t), cudaMemcpyHostToDevice, c->stream))
            rc = cq_err_set(err, CQ_ERR_DEVICE, "uploading the reverse order failed");
    }
    if (!rc && (cudaMemcpyAsync(c->tokens, b->tokens, T * sizeof(int32_t), cudaMemcpyHostToDevice, c->stream) ||
                cudaMemcpyAsync(c->piece_off, b->piece_off, (P + 1) * sizeof(size_t), cudaMemcpyHostToDevice,
                                c->stream)))
        rc = cq_err_set(err, CQ_ERR_DEVICE, "uploading tokens failed");
    if (!rc && c->emb) {
        embed_kernel<<<blocks_for(T * dm, 256), 256, 0, c->stream>>>(c->tokens, c->emb, c->x, T, (int)dm);
    } else if (!rc) { /* external vocabulary: projected rows from the model's cache, uploaded */
        if (T * dm > c->cap_host_x) {
            float *p = (float *)realloc(c->host_x, T * dm * sizeof(float));
            if (!p) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            else c->host_x = p, c->cap_host_x = T * dm;
        }
        if (!rc) rc = cq_ssm_embed(m, b->tokens, T, c->host_x, err);
        if (!rc && cudaMemcpyAsync(c->x, c->host_x, T * dm * sizeof(float), cudaMemcpyHostToDevice, c->stream))
            rc = cq_err_set(err, CQ_ERR_DEVICE, "uploading the input rows failed");
    }
    for (size_t l = 0; !rc && l < L; l++) {
        rmsnorm_kernel<<<blocks_for(T, 8), 256, 0, c->stream>>>(c->x, c->norm[l], c->xn, T, (int)dm,
                                                                  m->cfg.norm_eps);
        rc = mixer(c, &c->fwd[l], &c->fwd_l, (int)l, c->xn, T, c->x, 1.0f, err);
        if (!rc && m->cfg.bidirectional) {
            float *cs = c->conv_state, *hs = c->h_state;
            c->conv_state = c->h_state = NULL; /* the reversed scan has no state */
            gather_rows_kernel<<<blocks_for(T * dm, 256), 256, 0, c->stream>>>(c->xn, c->perm, c->xr, T, (int)dm);
            rc = mixer(c, &c->rev[l], &c->rev_l, (int)l, c->xr, T, c->tmp, 0.0f, err);
            c->conv_state = cs;
            c->h_state = hs;
            scatter_add_rows_kernel<<<blocks_for(T * dm, 256), 256, 0, c->stream>>>(c->tmp, c->perm, c->x, T,
                                                                                     (int)dm);
        }
    }
    if (!rc) {
        rmsnorm_kernel<<<blocks_for(T, 8), 256, 0, c->stream>>>(c->x, c->norm_f, c->xn, T, (int)dm, m->cfg.norm_eps);
        if (P) pool_sums_kernel<<<(unsigned)P, 128, 0, c->stream>>>(c->xn, c->piece_off, (int)dm, c->psum, c->plast);
        rc = gemm(c, c->psum, (int)dm, P, c->pool_w, (int)(2 * dm), (int)E, (int)dm, c->pool_mean, (int)E, 0.0f, err);
        if (!rc)
            rc = gemm(c, c->plast, (int)dm, P, c->pool_w + dm, (int)(2 * dm), (int)E, (int)dm, c->pool_last, (int)E,
                      0.0f, err);
    }
    if (!rc) {
        cudaStream_t st = c->stream;
        cudaError_t e = cudaMemcpyAsync(b->pool_mean, c->pool_mean, P * E * sizeof(float), cudaMemcpyDeviceToHost, st);
        if (!e) e = cudaMemcpyAsync(b->pool_last, c->pool_last, P * E * sizeof(float), cudaMemcpyDeviceToHost, st);
        if (!e && b->outputs) e = cudaMemcpyAsync(b->outputs, c->xn, T * dm * sizeof(float), cudaMemcpyDeviceToHost, st);
        if (!e && b->piece_sum) e = cudaMemcpyAsync(b->piece_sum, c->psum, P * dm * sizeof(float), cudaMemcpyDeviceToHost, st);
        if (!e && b->piece_sum)
            e = cudaMemcpyAsync(b->piece_last, c->plast, P * dm * sizeof(float), cudaMemcpyDeviceToHost, st);
        for (size_t s = 0; !e && s < b->n_seq; s++)
            if (slots[s] >= 0) {
                e = cudaMemcpyAsync(b->states[s]->conv, c->conv_state + slots[s] * conv_per, conv_per * sizeof(float),
                                    cudaMemcpyDeviceToHost, st);
                if (!e)
                    e = cudaMemcpyAsync(b->states[s]->h, c->h_state + slots[s] * h_per, h_per * sizeof(float),
                                        cudaMemcpyDeviceToHost, st);
            }
        if (!e) e = cudaStreamSynchronize(st);
        if (e) rc = cq_err_set(err, CQ_ERR_DEVICE, "SSM forward on the GPU failed: %s", cudaGetErrorString(e));
    }
    free(perm);
    free(slots);
    free(no_slots);
    return rc;
}

/* For bench_ssm: times the three scan passes alone on T tokens of one sequence (random inputs), and a
 * device-to-device copy of the same order of bytes. Bytes counted for the scan: pass 1 reads xc, Δ and B;
 * pass 3 reads xc, Δ, z, B, C and writes y; chunk boundary states both ways. */
extern "C" cq_status cq_ssm_cuda_bench_scan(cq_ssm_cuda *c, size_t T, double *scan_ms, double *scan_gbps,
                                            double *copy_gbps, cq_err *err) {
    const cq_ssm_model *m = c->m;
    const size_t Di = m->d_inner, N = m->cfg.d_state, R = m->cfg.dt_rank;
    cq_status rc = ensure_scratch(c, T, 1, err);
    size_t off[2] = {0, T};
    int slot = -1;
    if (!rc) rc = upload_layout(c, &c->fwd_l, T, 1, off, &slot, err);
    size_t n_chunks = c->fwd_l.n_chunks, cc = 0;
    if (!rc && n_chunks > c->cap_chunks) {
        rc = grow_dev((void **)&c->chunk_end, &cc, n_chunks * Di * N, sizeof(float), err);
        cc = 0;
        if (!rc) rc = grow_dev((void **)&c->chunk_decay, &cc, n_chunks * Di * N, sizeof(float), err);
        cc = 0;
        if (!rc) rc = grow_dev((void **)&c->h_start, &cc, n_chunks * Di * N, sizeof(float), err);
        if (!rc) c->cap_chunks = n_chunks;
    }
    if (rc) return rc;
    /* inputs: small values so nothing overflows (their values do not change the work) */
    CUDA_TRY(cudaMemsetAsync(c->xc, 0, T * Di * sizeof(float), c->stream));
    CUDA_TRY(cudaMemsetAsync(c->dt, 0, T * Di * sizeof(float), c->stream));
    CUDA_TRY(cudaMemsetAsync(c->xz, 0, T * 2 * Di * sizeof(float), c->stream));
    CUDA_TRY(cudaMemsetAsync(c->xdbl, 0, T * (R + 2 * N) * sizeof(float), c->stream));
    const dev_mixer *w = &c->fwd[0];
    cudaEvent_t e0, e1;
    CUDA_TRY(cudaEventCreate(&e0));
    CUDA_TRY(cudaEventCreate(&e1));
    const int reps = 10;
    float ms = 0;
    for (int r = -1; r < reps; r++) { /* r = -1 warms up */
        if (r == 0) CUDA_TRY(cudaEventRecord(e0, c->stream));
        scan_pass(c, &c->fwd_l, w, 1);
        scan_chain_kernel<<<blocks_for(Di * N, 256), 256, 0, c->stream>>>(
            c->fwd_l.seq_chunk_off, c->fwd_l.seq_slot, 1, (int)Di, (int)N, c->chunk_end, c->chunk_decay, c->h_start,
            NULL, 0);
        scan_pass(c, &c->fwd_l, w, 3);
    }
    CUDA_TRY(cudaEventRecord(e1, c->stream));
    CUDA_TRY(cudaEventSynchronize(e1));
    CUDA_TRY(cudaGetLastError());
    CUDA_TRY(cudaEventElapsedTime(&ms, e0, e1));
    *scan_ms = ms / reps;
    double bytes = 4.0 * (6.0 * T * Di + 3.0 * T * N + 6.0 * n_chunks * Di * N);
    *scan_gbps = bytes / (*scan_ms * 1e-3) / 1e9;
    /* copy: the in/out-projection buffer onto itself shifted, 2 × bytes moved */
    size_t copy_bytes = T * Di * sizeof(float);
    CUDA_TRY(cudaEventRecord(e0, c->stream));
    for (int r = 0; r < reps; r++)
        CUDA_TRY(cudaMemcpyAsync(c->xz, c->xz + T * Di, copy_bytes, cudaMemcpyDeviceToDevice, c->stream));
    CUDA_TRY(cudaEventRecord(e1, c->stream));
    CUDA_TRY(cudaEventSynchronize(e1));
    CUDA_TRY(cudaEventElapsedTime(&ms, e0, e1));
    *copy_gbps = 2.0 * copy_bytes * reps / (ms * 1e-3) / 1e9;
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return CQ_OK;
}
