/* The CUDA forward of Gemma 3 (see forward_cuda.h for the design, attention/decoder.h for the formulas).
 *
 * Per chunk of T tokens: embed -> per layer { RMSNorm -> q,k,v GEMMs -> QK-norm + RoPE + KV store -> attention ->
 * o GEMM -> post-norm + residual -> RMSNorm -> gate,up GEMMs -> GeGLU -> down GEMM -> post-norm + residual } ->
 * final norm -> logits GEMM (tied embedding). */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern "C" { /* C headers: their functions keep C linkage */
#include "attention/model.h"
#include "attention/quant.h"
#include "core/error.h"
#include "core/log.h"
}
#include "attention/forward_cuda.h"
#include "core/cuda_check.h"

#define ATT_WARPS 4       /* warps per attention block; their running softmaxes merge in shared memory */
#define MAX_HD_PER_LANE 16 /* head_dim <= 512 */
#define LOGIT_ROWS 64     /* tokens whose logits are computed at once */

typedef __nv_bfloat16 bf16;

/* ---- kernels ----------------------------------------------------------------------------------------------- */

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result */
__device__ float block_sum(float v) {
    __shared__ float part[32];
    __shared__ float total;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float s = lane < (int)(blockDim.x / 32) ? part[lane] : 0.0f;
        s = warp_sum(s);
        if (lane == 0) total = s;
    }
    __syncthreads();
    float r = total;
    __syncthreads();
    return r;
}

__global__ void embed_kernel(const int32_t *tokens, const bf16 *emb, float *x, int T, int d, float scale) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)T * d) return;
    x[i] = __bfloat162float(emb[(size_t)tokens[i / d] * d + i % d]) * scale;
}

/* one block per row: y = x / sqrt(mean(x^2) + eps) * w; with add, x_out += that instead (post-norm residual) */
__global__ void rmsnorm_kernel(const float *x, const float *w, float *y, int n, float eps, int add) {
    const float *xr = x + (size_t)blockIdx.x * n;
    float *yr = y + (size_t)blockIdx.x * n;
    float ss = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
    float r = rsqrtf(block_sum(ss) / n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float v = xr[i] * r * w[i];
        yr[i] = add ? yr[i] + v : v;
    }
}

__global__ void to_bf16_kernel(const float *x, bf16 *y, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2bfloat16(x[i]);
}

__device__ __forceinline__ float gelu_tanh_d(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

__global__ void geglu_kernel(float *y, const float *u, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = gelu_tanh_d(y[i]) * u[i];
}

__global__ void softcap_kernel(float *x, size_t n, float cap) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) x[i] = cap * tanhf(x[i] / cap);
}

/* One block per (token, head slot): slots [0, H) are query heads, [H, H + Hkv) key heads. blockDim = head_dim / 2,
 * thread i owns the RoPE pair (i, i + half). RMSNorm over the head with its weight, then RoPE at position pos0 + t
 * (angle in double: positions reach 32k); keys and their values go to the cache slot of that position. */
__global__ void qk_norm_rope_store_kernel(float *q, const float *k, const float *v, const float *q_norm,
                                          const float *k_norm, const double *inv_freq, float *kcache, float *vcache,
                                          int H, int Hkv, int hd, const int32_t *pos0p, int slots, int ring,
                                          float eps) {
    const int32_t pos0 = *pos0p; /* in device memory, so that a captured decode graph replays at any position */
    const int t = blockIdx.x / (H + Hkv), hs = blockIdx.x % (H + Hkv), half = hd / 2, i = threadIdx.x;
    const bool is_q = hs < H;
    const float *src = is_q ? q + ((size_t)t * H + hs) * hd : k + ((size_t)t * Hkv + (hs - H)) * hd;
    const float *w = is_q ? q_norm : k_norm;
    float x0 = src[i], x1 = src[i + half];
    float r = rsqrtf(block_sum(x0 * x0 + x1 * x1) / hd + eps);
    x0 *= r * w[i];
    x1 *= r * w[i + half];
    const int32_t p = pos0 + t;
    double s, c;
    sincos((double)p * inv_freq[i], &s, &c);
    float cf = (float)c, sf = (float)s;
    float y0 = x0 * cf - x1 * sf, y1 = x1 * cf + x0 * sf;
    if (is_q) {
        float *dst = q + ((size_t)t * H + hs) * hd;
        dst[i] = y0;
        dst[i + half] = y1;
    } else {
        const int kvh = hs - H;
        const size_t slot = ring ? (size_t)(p % slots) : (size_t)p;
        float *kd = kcache + (slot * Hkv + kvh) * hd, *vd = vcache + (slot * Hkv + kvh) * hd;
        const float *vs = v + ((size_t)t * Hkv + kvh) * hd;
        kd[i] = y0;
        kd[i + half] = y1;
        vd[i] = vs[i];
        vd[i + half] = vs[i + half];
    }
}

/* Attention, pass 1. Grid (T*H, n_split), ATT_WARPS warps per block. Query (t, h) at position p sees keys
 * [lo, p] (lo = p - window + 1 on local layers); split s takes a contiguous share of them, and the warps of the
 * block take groups of KEY_GROUP consecutive keys in turn (the loads of a group are in flight together), each
 * keeping a running max m, sum l and weighted values (online softmax). Lanes hold head_dim/32 consecutive
 * dimensions. The warps merge in shared memory and the block writes one partial (m, l, acc) for pass 2. */
#define KEY_GROUP 4
__global__ void attention_partial_kernel(const float *q, const float *kcache, const float *vcache, float *part, int H,
                                         int Hkv, int hd, const int32_t *pos0p, int window, int slots, int ring,
                                         float scale, float softcap) {
    __shared__ float sm_ml[ATT_WARPS][2];
    __shared__ float sm_acc[ATT_WARPS][32 * MAX_HD_PER_LANE];
    const int32_t pos0 = *pos0p;
    const int th = blockIdx.x, t = th / H, h = th % H, kvh = h / (H / Hkv);
    const int split = blockIdx.y, n_split = gridDim.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int per = hd / 32;
    const int32_t p = pos0 + t, lo = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
    const int32_t n = p - lo + 1, share = (n + n_split - 1) / n_split;
    const int32_t a = lo + split * share, b = min(p + 1, a + share);
    float qv[MAX_HD_PER_LANE], acc[MAX_HD_PER_LANE];
    const float *qr = q + ((size_t)t * H + h) * hd + lane * per;
#pragma unroll
    for (int i = 0; i < MAX_HD_PER_LANE; i++) qv[i] = i < per ? qr[i] : 0.0f, acc[i] = 0;
    float m = -INFINITY, l = 0;
    for (int32_t j0 = a + warp * KEY_GROUP; j0 < b; j0 += ATT_WARPS * KEY_GROUP) {
        float sc[KEY_GROUP];
        size_t row[KEY_GROUP];
#pragma unroll
        for (int g = 0; g < KEY_GROUP; g++) {
            int32_t j = j0 + g < b ? j0 + g : j0; /* past the share: recompute key j0, masked below */
            row[g] = ((ring ? (size_t)(j % slots) : (size_t)j) * Hkv + kvh) * hd + lane * per;
            const float *kr = kcache + row[g];
            float d = 0;
#pragma unroll
            for (int i = 0; i < MAX_HD_PER_LANE; i++)
                if (i < per) d += qv[i] * kr[i];
            sc[g] = d;
        }
        float gmax = -INFINITY;
#pragma unroll
        for (int g = 0; g < KEY_GROUP; g++) {
            float v = warp_sum(sc[g]) * scale;
            if (softcap > 0) v = softcap * tanhf(v / softcap);
            sc[g] = j0 + g < b ? v : -INFINITY;
            gmax = fmaxf(gmax, sc[g]);
        }
        float m_new = fmaxf(m, gmax), corr = expf(m - m_new), esum = 0;
#pragma unroll
        for (int i = 0; i < MAX_HD_PER_LANE; i++) acc[i] *= corr;
#pragma unroll
        for (int g = 0; g < KEY_GROUP; g++) {
            float e = expf(sc[g] - m_new); /* 0 for a masked key */
            esum += e;
            const float *vr = vcache + row[g];
#pragma unroll
            for (int i = 0; i < MAX_HD_PER_LANE; i++)
                if (i < per) acc[i] += e * vr[i];
        }
        l = l * corr + esum;
        m = m_new;
    }
    if (lane == 0) sm_ml[warp][0] = m, sm_ml[warp][1] = l;
#pragma unroll
    for (int i = 0; i < MAX_HD_PER_LANE; i++)
        if (i < per) sm_acc[warp][lane * per + i] = acc[i];
    __syncthreads();
    float M = -INFINITY;
    for (int w = 0; w < ATT_WARPS; w++) M = fmaxf(M, sm_ml[w][0]);
    float *out = part + ((size_t)th * n_split + split) * (hd + 2);
    float wgt[ATT_WARPS], L = 0;
    for (int w = 0; w < ATT_WARPS; w++) {
        wgt[w] = M == -INFINITY ? 0.0f : expf(sm_ml[w][0] - M);
        L += sm_ml[w][1] * wgt[w];
    }
    if (threadIdx.x == 0) out[0] = M, out[1] = L;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float v = 0;
        for (int w = 0; w < ATT_WARPS; w++) v += sm_acc[w][d] * wgt[w];
        out[2 + d] = v;
    }
}

/* Attention, pass 2: one block per (t, h), one thread per dimension: merge the splits. */
__global__ void attention_combine_kernel(const float *part, float *out, int hd, int n_part) {
    const int th = blockIdx.x, d = threadIdx.x;
    const float *pp = part + (size_t)th * n_part * (hd + 2);
    float M = -INFINITY;
    for (int i = 0; i < n_part; i++) M = fmaxf(M, pp[(size_t)i * (hd + 2)]);
    float L = 0, acc = 0;
#pragma unroll 4
    for (int i = 0; i < n_part; i++) {
        const float *pi = pp + (size_t)i * (hd + 2);
        float w = pi[1] == 0 ? 0.0f : expf(pi[0] - M); /* an empty share weighs nothing */
        L += pi[1] * w;
        acc += pi[2 + d] * w;
    }
    out[(size_t)th * hd + d] = acc / L;
}

/* One decode step reads every weight once: matrix-vector products with a warp per row, 16-byte loads of 8 bf16
 * weights per lane, x in float (cols a multiple of 8). */
__device__ __forceinline__ float row_dot(const bf16 *w, const float *x, int cols, int lane) {
    float s = 0;
    for (int i = lane * 8; i < cols; i += 256) {
        uint4 raw = *(const uint4 *)(w + i);
        const __nv_bfloat162 *h = (const __nv_bfloat162 *)&raw;
        float4 x0 = *(const float4 *)(x + i), x1 = *(const float4 *)(x + i + 4);
        float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]), c = __bfloat1622float2(h[2]),
               d = __bfloat1622float2(h[3]);
        s += a.x * x0.x + a.y * x0.y + b.x * x0.z + b.y * x0.w + c.x * x1.x + c.y * x1.y + d.x * x1.z + d.y * x1.w;
    }
    return warp_sum(s);
}

#define GEMV_ROWS 8 /* rows (warps) per block */

/* y[r] = W[r] . x for up to three matrices stacked by rows (q, k, v share one launch) */
__global__ void gemv3_kernel(const bf16 *w0, int r0, float *y0, const bf16 *w1, int r1, float *y1, const bf16 *w2,
                             int r2, float *y2, int cols, const float *x) {
    int row = blockIdx.x * GEMV_ROWS + threadIdx.x / 32, lane = threadIdx.x % 32;
    const bf16 *w;
    float *y;
    if (row < r0) w = w0, y = y0;
    else if ((row -= r0) < r1) w = w1, y = y1;
    else if ((row -= r1) < r2) w = w2, y = y2;
    else return;
    float v = row_dot(w + (size_t)row * cols, x, cols, lane);
    if (lane == 0) y[row] = v;
}

/* y[r] = gelu(Wg[r] . x) * (Wu[r] . x) */
__global__ void gemv_geglu_kernel(const bf16 *wg, const bf16 *wu, int rows, int cols, const float *x, float *y) {
    int row = blockIdx.x * GEMV_ROWS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    float g = row_dot(wg + (size_t)row * cols, x, cols, lane), u = row_dot(wu + (size_t)row * cols, x, cols, lane);
    if (lane == 0) y[row] = gelu_tanh_d(g) * u;
}

/* The residual step of a block and the norm that opens the next one: x += RMSNorm(o) * w_post, then
 * xn = RMSNorm(x) * w_next. One block per row. */
__global__ void addnorm_kernel(float *x, const float *o, const float *w_post, const float *w_next, float *xn, int n,
                               float eps) {
    float *xr = x + (size_t)blockIdx.x * n, *nr = xn + (size_t)blockIdx.x * n;
    const float *orow = o + (size_t)blockIdx.x * n;
    float ss = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += orow[i] * orow[i];
    float r = rsqrtf(block_sum(ss) / n + eps);
    ss = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float v = xr[i] + orow[i] * r * w_post[i];
        xr[i] = v;
        ss += v * v;
    }
    r = rsqrtf(block_sum(ss) / n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) nr[i] = xr[i] * r * w_next[i];
}

/* ---- model and sequence -------------------------------------------------------------------------------------- */

typedef struct {
    bf16 *w;
    int64_t rows, cols;
} dmat;

typedef struct {
    dmat wq, wk, wv, wo, wgate, wup, wdown;
    float *attn_norm, *q_norm, *k_norm, *post_attn_norm, *ffn_norm, *post_ffw_norm;
} dlayer;

struct cq_cuda_model {
    const cq_gemma *m;
    cudaStream_t stream;
    cublasHandle_t blas;
    dlayer *layers;
    bf16 *token_embd; /* (n_vocab, n_embd): embedding and output */
    float *output_norm;
    double *inv_freq[2]; /* local, global */
    size_t max_cols;
    void *blas_workspace; /* given to cuBLAS, so that it allocates nothing while a graph is captured */
};

struct cq_cuda_seq {
    cq_cuda_model *cm;
    int32_t max_tokens;
    float **k, **v;
    int32_t *slots;
    int32_t *tokens, *pos;  /* device: the chunk's tokens, its first position */
    int32_t *h_step;        /* pinned host: token and position of a step (read by the graphs' copies) */
    int32_t *h_tokens;      /* pinned host: the tokens of a full prefill chunk */
    float *h_logits;        /* pinned host: a decode step's logits */
    float *x, *xn, *q, *kn, *vn, *att, *o, *g, *u, *part, *logits;
    bf16 *xb;
    size_t part_floats;
    cudaGraphExec_t decode_graph;  /* one decode step, captured at the first one and replayed */
    cudaGraphExec_t prefill_graph; /* one full chunk of CQ_CUDA_BATCH tokens, captured at the second one */
    bool full_chunk_seen;          /* a full chunk ran outside a graph (cuBLAS has picked its kernels) */
    bool no_graphs;                /* a capture failed: launch kernels directly (slower, same results) */
};

extern "C" bool cq_cuda_available(void) {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

/* Dequantizes W on the host (row by row through cq_dequant_row) into bf16 and uploads it. */
static cq_status upload_matrix(const cq_wmat *w, dmat *out, cq_err *err) {
    out->rows = w->rows;
    out->cols = w->cols;
    const size_t n = (size_t)w->rows * (size_t)w->cols;
    uint16_t *host = (uint16_t *)malloc(n * sizeof(uint16_t));
    float *row = (float *)malloc((size_t)w->cols * sizeof(float));
    if (!host || !row) {
        free(host);
        free(row);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory staging weights");
    }
    for (int64_t r = 0; r < w->rows; r++) {
        cq_dequant_row(w->type, (const uint8_t *)w->data + (size_t)r * w->row_bytes, row, (size_t)w->cols);
        for (int64_t c = 0; c < w->cols; c++) host[(size_t)r * w->cols + c] = cq_f32_to_bf16(row[c]);
    }
    free(row);
    cudaError_t e = cudaMalloc(&out->w, n * sizeof(bf16));
    if (e == cudaSuccess) e = cudaMemcpy(out->w, host, n * sizeof(bf16), cudaMemcpyHostToDevice);
    free(host);
    if (e != cudaSuccess)
        return cq_err_set(err, CQ_ERR_DEVICE, "uploading a %lld x %lld matrix: %s", (long long)w->rows,
                          (long long)w->cols, cudaGetErrorString(e));
    return CQ_OK;
}

static cq_status upload_floats(const float *h, size_t n, float **out, cq_err *err) {
    CUDA_TRY(cudaMalloc(out, n * sizeof(float)));
    CUDA_TRY(cudaMemcpy(*out, h, n * sizeof(float), cudaMemcpyHostToDevice));
    return CQ_OK;
}

static void rope_freqs(double *inv_freq, int head_dim, float base, float freq_scale) {
    for (int i = 0; i < head_dim / 2; i++) inv_freq[i] = pow((double)base, -2.0 * i / head_dim) * freq_scale;
}

extern "C" cq_status cq_cuda_model_new(const cq_gemma *m, cq_cuda_model **out, cq_err *err) {
    *out = NULL;
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    if (m->n_embd % 8 || m->n_ff % 8) /* the decode kernels load 8 bf16 weights at a time */
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "CUDA decoder: n_embd and n_ff must be multiples of 8");
    if (m->head_dim % 64 || m->head_dim > 32 * MAX_HD_PER_LANE)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "CUDA decoder: head_dim %d is not a multiple of 64 up to %d",
                          m->head_dim, 32 * MAX_HD_PER_LANE);
    cq_cuda_model *cm = (cq_cuda_model *)calloc(1, sizeof *cm);
    if (!cm) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cm->m = m;
    *out = cm; /* freed by the caller's cq_cuda_model_free on any error below */
    CUDA_TRY(cudaStreamCreateWithFlags(&cm->stream, cudaStreamNonBlocking));
    CUBLAS_TRY(cublasCreate(&cm->blas));
    CUBLAS_TRY(cublasSetStream(cm->blas, cm->stream));
    const size_t ws_bytes = 32u << 20;
    CUDA_TRY(cudaMalloc(&cm->blas_workspace, ws_bytes));
    CUBLAS_TRY(cublasSetWorkspace(cm->blas, cm->blas_workspace, ws_bytes));
    cm->layers = (dlayer *)calloc((size_t)m->n_layer, sizeof *cm->layers);
    if (!cm->layers) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_status s;
    dmat emb;
    if ((s = upload_matrix(&m->token_embd, &emb, err))) return s;
    cm->token_embd = emb.w;
    if ((s = upload_floats(m->output_norm, (size_t)m->n_embd, &cm->output_norm, err))) return s;
    const size_t d = (size_t)m->n_embd, hd = (size_t)m->head_dim;
    for (int32_t l = 0; l < m->n_layer; l++) {
        const cq_gemma_layer *L = &m->layers[l];
        dlayer *D = &cm->layers[l];
        if ((s = upload_matrix(&L->wq, &D->wq, err)) || (s = upload_matrix(&L->wk, &D->wk, err)) ||
            (s = upload_matrix(&L->wv, &D->wv, err)) || (s = upload_matrix(&L->wo, &D->wo, err)) ||
            (s = upload_matrix(&L->wgate, &D->wgate, err)) || (s = upload_matrix(&L->wup, &D->wup, err)) ||
            (s = upload_matrix(&L->wdown, &D->wdown, err)) ||
            (s = upload_floats(L->attn_norm, d, &D->attn_norm, err)) ||
            (s = upload_floats(L->q_norm, hd, &D->q_norm, err)) || (s = upload_floats(L->k_norm, hd, &D->k_norm, err)) ||
            (s = upload_floats(L->post_attn_norm, d, &D->post_attn_norm, err)) ||
            (s = upload_floats(L->ffn_norm, d, &D->ffn_norm, err)) ||
            (s = upload_floats(L->post_ffw_norm, d, &D->post_ffw_norm, err)))
            return s;
    }
    double *freq = (double *)malloc(hd / 2 * sizeof(double));
    if (!freq) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (int kind = 0; kind < 2; kind++) {
        for (int32_t l = 0; l < m->n_layer; l++)
            if (m->layers[l].global == (kind == 1))
                rope_freqs(freq, m->head_dim, m->layers[l].rope_base, m->layers[l].rope_freq_scale);
        cudaError_t e = cudaMalloc(&cm->inv_freq[kind], hd / 2 * sizeof(double));
        if (e == cudaSuccess) e = cudaMemcpy(cm->inv_freq[kind], freq, hd / 2 * sizeof(double), cudaMemcpyHostToDevice);
        if (e != cudaSuccess) {
            free(freq);
            return cq_err_set(err, CQ_ERR_DEVICE, "uploading RoPE tables: %s", cudaGetErrorString(e));
        }
    }
    free(freq);
    /* Load every kernel now: with lazy module loading, a kernel first launched inside a graph capture would be
     * loaded there, which some drivers refuse. */
    const void *kernels[] = {(const void *)embed_kernel,         (const void *)rmsnorm_kernel,
                             (const void *)to_bf16_kernel,       (const void *)geglu_kernel,
                             (const void *)softcap_kernel,       (const void *)qk_norm_rope_store_kernel,
                             (const void *)attention_partial_kernel, (const void *)attention_combine_kernel,
                             (const void *)gemv3_kernel,         (const void *)gemv_geglu_kernel,
                             (const void *)addnorm_kernel};
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        cudaFuncAttributes fa;
        CUDA_TRY(cudaFuncGetAttributes(&fa, kernels[i]));
    }
    cm->max_cols = d;
    if ((size_t)m->n_ff > cm->max_cols) cm->max_cols = (size_t)m->n_ff;
    if ((size_t)m->n_head * hd > cm->max_cols) cm->max_cols = (size_t)m->n_head * hd;
    return CQ_OK;
}

extern "C" void cq_cuda_model_free(cq_cuda_model *cm) {
    if (!cm) return;
    if (cm->layers) {
        for (int32_t l = 0; l < cm->m->n_layer; l++) {
            dlayer *D = &cm->layers[l];
            cudaFree(D->wq.w), cudaFree(D->wk.w), cudaFree(D->wv.w), cudaFree(D->wo.w);
            cudaFree(D->wgate.w), cudaFree(D->wup.w), cudaFree(D->wdown.w);
            cudaFree(D->attn_norm), cudaFree(D->q_norm), cudaFree(D->k_norm);
            cudaFree(D->post_attn_norm), cudaFree(D->ffn_norm), cudaFree(D->post_ffw_norm);
        }
    }
    free(cm->layers);
    cudaFree(cm->token_embd);
    cudaFree(cm->output_norm);
    cudaFree(cm->inv_freq[0]);
    cudaFree(cm->inv_freq[1]);
    if (cm->blas) cublasDestroy(cm->blas);
    cudaFree(cm->blas_workspace);
    if (cm->stream) cudaStreamDestroy(cm->stream);
    free(cm);
}

/* Attention partial buffers: enough for a full batch with one split, or one token split over its whole range. */
static size_t part_floats_for(const cq_gemma *m, int32_t max_tokens) {
    size_t a = (size_t)CQ_CUDA_BATCH * m->n_head * (m->head_dim + 2);
    size_t b = (size_t)m->n_head * 64 * (m->head_dim + 2); /* a decode step: up to 64 splits */
    return a > b ? a : b;
}

extern "C" cq_status cq_cuda_seq_new(cq_cuda_model *cm, int32_t max_tokens, cq_cuda_seq **out, cq_err *err) {
    *out = NULL;
    const cq_gemma *m = cm->m;
    cq_cuda_seq *s = (cq_cuda_seq *)calloc(1, sizeof *s);
    if (!s) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    s->cm = cm;
    s->max_tokens = max_tokens;
    *out = s; /* freed by cq_cuda_seq_free on any error below */
    s->k = (float **)calloc((size_t)m->n_layer, sizeof *s->k);
    s->v = (float **)calloc((size_t)m->n_layer, sizeof *s->v);
    s->slots = (int32_t *)calloc((size_t)m->n_layer, sizeof *s->slots);
    if (!s->k || !s->v || !s->slots) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    const size_t kvd = (size_t)m->n_head_kv * m->head_dim, f = sizeof(float), B = CQ_CUDA_BATCH;
    const int32_t ring = m->window + CQ_CUDA_BATCH < max_tokens ? m->window + CQ_CUDA_BATCH : max_tokens;
    for (int32_t l = 0; l < m->n_layer; l++) {
        s->slots[l] = m->layers[l].global ? max_tokens : ring;
        CUDA_TRY(cudaMalloc(&s->k[l], (size_t)s->slots[l] * kvd * f));
        CUDA_TRY(cudaMalloc(&s->v[l], (size_t)s->slots[l] * kvd * f));
    }
    const size_t d = (size_t)m->n_embd, qd = (size_t)m->n_head * m->head_dim, ff = (size_t)m->n_ff;
    s->part_floats = part_floats_for(m, max_tokens);
    CUDA_TRY(cudaMalloc(&s->tokens, B * sizeof(int32_t)));
    CUDA_TRY(cudaMalloc(&s->pos, sizeof(int32_t)));
    CUDA_TRY(cudaMallocHost(&s->h_step, 2 * sizeof(int32_t)));
    CUDA_TRY(cudaMallocHost(&s->h_tokens, B * sizeof(int32_t)));
    CUDA_TRY(cudaMallocHost(&s->h_logits, (size_t)m->n_vocab * sizeof(float)));
    CUDA_TRY(cudaMalloc(&s->x, B * d * f));
    CUDA_TRY(cudaMalloc(&s->xn, B * d * f));
    CUDA_TRY(cudaMalloc(&s->o, B * d * f));
    CUDA_TRY(cudaMalloc(&s->q, B * qd * f));
    CUDA_TRY(cudaMalloc(&s->att, B * qd * f));
    CUDA_TRY(cudaMalloc(&s->kn, B * kvd * f));
    CUDA_TRY(cudaMalloc(&s->vn, B * kvd * f));
    CUDA_TRY(cudaMalloc(&s->g, B * ff * f));
    CUDA_TRY(cudaMalloc(&s->u, B * ff * f));
    CUDA_TRY(cudaMalloc(&s->part, s->part_floats * f));
    CUDA_TRY(cudaMalloc(&s->xb, B * cm->max_cols * sizeof(bf16)));
    CUDA_TRY(cudaMalloc(&s->logits, (size_t)LOGIT_ROWS * m->n_vocab * f));
    return CQ_OK;
}

extern "C" void cq_cuda_seq_free(cq_cuda_seq *s) {
    if (!s) return;
    for (int32_t l = 0; s->k && l < s->cm->m->n_layer; l++) cudaFree(s->k[l]), cudaFree(s->v[l]);
    free(s->k), free(s->v), free(s->slots);
    cudaFree(s->tokens), cudaFree(s->x), cudaFree(s->xn), cudaFree(s->o), cudaFree(s->q), cudaFree(s->att);
    cudaFree(s->kn), cudaFree(s->vn), cudaFree(s->g), cudaFree(s->u), cudaFree(s->part), cudaFree(s->xb);
    cudaFree(s->logits), cudaFree(s->pos);
    cudaFreeHost(s->h_step), cudaFreeHost(s->h_logits), cudaFreeHost(s->h_tokens);
    if (s->decode_graph) cudaGraphExecDestroy(s->decode_graph);
    if (s->prefill_graph) cudaGraphExecDestroy(s->prefill_graph);
    free(s);
}

static unsigned blocks_for(size_t n, unsigned threads) { return (unsigned)((n + threads - 1) / threads); }

/* y (T, W.rows) f32 = x (T, W.cols) W^T, x given as bf16. Row-major y = x W^T is, column-major,
 * Y (rows x T) = W^T-of-(cols x rows) times X (cols x T). */
static cq_status gemm(cq_cuda_model *cm, const dmat *w, const bf16 *x, int T, float *y, cq_err *err) {
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_TRY(cublasGemmEx(cm->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)w->rows, T, (int)w->cols, &one, w->w, CUDA_R_16BF,
                            (int)w->cols, x, CUDA_R_16BF, (int)w->cols, &zero, y, CUDA_R_32F, (int)w->rows,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return CQ_OK;
}

static cq_status to_bf16(cq_cuda_model *cm, const float *x, bf16 *y, size_t n, cq_err *err) {
    to_bf16_kernel<<<blocks_for(n, 256), 256, 0, cm->stream>>>(x, y, n);
    LAUNCH_TRY();
    return CQ_OK;
}

static cq_status rmsnorm(cq_cuda_model *cm, const float *x, const float *w, float *y, int rows, int n, int add,
                         cq_err *err) {
    rmsnorm_kernel<<<rows, 256, 0, cm->stream>>>(x, w, y, n, cm->m->rms_eps, add);
    LAUNCH_TRY();
    return CQ_OK;
}

/* Splits of the key range per (token, head). Prefill has blocks enough; a decode step (T = 1, which a graph
 * replays at every position) splits the largest range the layer can have into shares of about 64 keys. */
static int pick_splits(int T, int H, int32_t max_keys) {
    if ((int64_t)T * H >= 512) return 1;
    int s = (int)((max_keys + 63) / 64);
    return s < 1 ? 1 : s > 64 ? 64 : s;
}

static cq_status attention(cq_cuda_model *cm, const float *q, const float *kc, const float *vc, float *part,
                           size_t part_floats, float *out, int T, int H, int Hkv, int hd, const int32_t *pos0p,
                           int32_t max_keys, int window, int slots, int ring, float scale, float softcap, cq_err *err) {
    int splits = pick_splits(T, H, max_keys);
    while (splits > 1 && (size_t)T * H * splits * (hd + 2) > part_floats) splits /= 2;
    attention_partial_kernel<<<dim3((unsigned)(T * H), (unsigned)splits), 32 * ATT_WARPS, 0, cm->stream>>>(
        q, kc, vc, part, H, Hkv, hd, pos0p, window, slots, ring, scale, softcap);
    LAUNCH_TRY();
    attention_combine_kernel<<<T * H, hd, 0, cm->stream>>>(part, out, hd, splits);
    LAUNCH_TRY();
    return CQ_OK;
}

static cq_status gemv3(cq_cuda_model *cm, const dmat *a, float *ya, const dmat *b, float *yb, const dmat *c, float *yc,
                       const float *x, cq_err *err) {
    int rows = (int)(a->rows + (b ? b->rows : 0) + (c ? c->rows : 0));
    gemv3_kernel<<<(rows + GEMV_ROWS - 1) / GEMV_ROWS, 32 * GEMV_ROWS, 0, cm->stream>>>(
        a->w, (int)a->rows, ya, b ? b->w : NULL, b ? (int)b->rows : 0, yb, c ? c->w : NULL, c ? (int)c->rows : 0, yc,
        (int)a->cols, x);
    LAUNCH_TRY();
    return CQ_OK;
}

/* y (T, W.rows) = x W^T: cuBLAS for a batch, the warp-per-row kernel for one token (x in float, no conversion). */
static cq_status linear(cq_cuda_seq *s, const dmat *w, const float *x, int T, float *y, cq_err *err) {
    if (T == 1) return gemv3(s->cm, w, y, NULL, NULL, NULL, NULL, x, err);
    cq_status st = to_bf16(s->cm, x, s->xb, (size_t)T * w->cols, err);
    return st ? st : gemm(s->cm, w, s->xb, T, y, err);
}

static cq_status addnorm(cq_cuda_model *cm, float *x, const float *o, const float *w_post, const float *w_next,
                         float *xn, int T, cq_err *err) {
    addnorm_kernel<<<T, 256, 0, cm->stream>>>(x, o, w_post, w_next, xn, cm->m->n_embd, cm->m->rms_eps);
    LAUNCH_TRY();
    return CQ_OK;
}

/* The kernels of one chunk, queued on the stream: tokens in s->tokens and the first position in s->pos already.
 * With logits_rows > 0, the logits of the last logits_rows tokens (at most LOGIT_ROWS) end in s->logits. */
static cq_status enqueue_chunk(cq_cuda_seq *s, int T, int32_t pos0, int logits_rows, cq_err *err) {
    cq_cuda_model *cm = s->cm;
    const cq_gemma *m = cm->m;
    const int d = m->n_embd, hd = m->head_dim, H = m->n_head, Hkv = m->n_head_kv, ff = m->n_ff;
    cq_status st;
    embed_kernel<<<blocks_for((size_t)T * d, 256), 256, 0, cm->stream>>>(s->tokens, cm->token_embd, s->x, T, d,
                                                                          m->embed_scale);
    LAUNCH_TRY();
    if ((st = rmsnorm(cm, s->x, cm->layers[0].attn_norm, s->xn, T, d, 0, err))) return st;
    for (int32_t l = 0; l < m->n_layer; l++) {
        const cq_gemma_layer *L = &m->layers[l];
        const dlayer *D = &cm->layers[l];
        if (T == 1) st = gemv3(cm, &D->wq, s->q, &D->wk, s->kn, &D->wv, s->vn, s->xn, err);
        else if (!(st = to_bf16(cm, s->xn, s->xb, (size_t)T * d, err)) && !(st = gemm(cm, &D->wq, s->xb, T, s->q, err)))
            if (!(st = gemm(cm, &D->wk, s->xb, T, s->kn, err))) st = gemm(cm, &D->wv, s->xb, T, s->vn, err);
        if (st) return st;
        qk_norm_rope_store_kernel<<<T * (H + Hkv), hd / 2, 0, cm->stream>>>(
            s->q, s->kn, s->vn, D->q_norm, D->k_norm, cm->inv_freq[L->global], s->k[l], s->v[l], H, Hkv, hd, s->pos,
            s->slots[l], !L->global, m->rms_eps);
        LAUNCH_TRY();
        const int window = L->global ? 0 : m->window;
        /* the longest key range this launch can meet: for a decode step, any position up to the limit */
        int32_t max_keys = T == 1 ? s->max_tokens : pos0 + T;
        if (window > 0 && max_keys > window) max_keys = window;
        const float *w_next = l + 1 < m->n_layer ? cm->layers[l + 1].attn_norm : cm->output_norm;
        if ((st = attention(cm, s->q, s->k[l], s->v[l], s->part, s->part_floats, s->att, T, H, Hkv, hd, s->pos,
                            max_keys, window, s->slots[l], !L->global, m->attn_scale, m->attn_softcap, err)) ||
            (st = linear(s, &D->wo, s->att, T, s->o, err)) ||
            (st = addnorm(cm, s->x, s->o, D->post_attn_norm, D->ffn_norm, s->xn, T, err)))
            return st;
        if (T == 1) {
            gemv_geglu_kernel<<<(ff + GEMV_ROWS - 1) / GEMV_ROWS, 32 * GEMV_ROWS, 0, cm->stream>>>(
                D->wgate.w, D->wup.w, ff, d, s->xn, s->g);
            LAUNCH_TRY();
        } else {
            if ((st = to_bf16(cm, s->xn, s->xb, (size_t)T * d, err)) || (st = gemm(cm, &D->wgate, s->xb, T, s->g, err)) ||
                (st = gemm(cm, &D->wup, s->xb, T, s->u, err)))
                return st;
            geglu_kernel<<<blocks_for((size_t)T * ff, 256), 256, 0, cm->stream>>>(s->g, s->u, (size_t)T * ff);
            LAUNCH_TRY();
        }
        /* the last layer's closing norm is the output norm: xn is then ready for the logits */
        if ((st = linear(s, &D->wdown, s->g, T, s->o, err)) ||
            (st = addnorm(cm, s->x, s->o, D->post_ffw_norm, w_next, s->xn, T, err)))
            return st;
    }
    if (logits_rows > 0) {
        const dmat out_w = {cm->token_embd, m->n_vocab, m->n_embd};
        if ((st = linear(s, &out_w, s->xn + (size_t)(T - logits_rows) * d, logits_rows, s->logits, err))) return st;
        if (m->final_softcap > 0) {
            const size_t nv = (size_t)logits_rows * m->n_vocab;
            softcap_kernel<<<blocks_for(nv, 256), 256, 0, cm->stream>>>(s->logits, nv, m->final_softcap);
            LAUNCH_TRY();
        }
    }
    return CQ_OK;
}

/* Logits of rows [first, T) of a finished chunk (final-normed in s->xn) into host memory, LOGIT_ROWS at a time. */
static cq_status copy_logits(cq_cuda_seq *s, int first, int T, float *logits, cq_err *err) {
    cq_cuda_model *cm = s->cm;
    const cq_gemma *m = cm->m;
    const dmat out_w = {cm->token_embd, m->n_vocab, m->n_embd};
    for (int r = first; r < T; r += LOGIT_ROWS) {
        int n = T - r < LOGIT_ROWS ? T - r : LOGIT_ROWS;
        cq_status st = linear(s, &out_w, s->xn + (size_t)r * m->n_embd, n, s->logits, err);
        if (st) return st;
        const size_t nv = (size_t)n * m->n_vocab;
        if (m->final_softcap > 0) {
            softcap_kernel<<<blocks_for(nv, 256), 256, 0, cm->stream>>>(s->logits, nv, m->final_softcap);
            LAUNCH_TRY();
        }
        CUDA_TRY(cudaMemcpyAsync(logits + (size_t)(r - first) * m->n_vocab, s->logits, nv * sizeof(float),
                                 cudaMemcpyDeviceToHost, cm->stream));
    }
    return CQ_OK;
}

/* A decode step as a CUDA graph: the copies of token and position in, ~8 kernels per layer, the logits out. Captured
 * once per sequence; replaying it saves the launch overhead that dominates a 270M model at batch 1. */
static cq_status decode_step(cq_cuda_seq *s, int32_t token, int32_t pos, float *logits, cq_err *err) {
    cq_cuda_model *cm = s->cm;
    const size_t V = (size_t)cm->m->n_vocab;
    if (s->no_graphs) { /* capture failed once on this device: the same kernels, launched one by one */
        s->h_step[0] = token;
        s->h_step[1] = pos;
        CUDA_TRY(cudaMemcpyAsync(s->tokens, s->h_step, sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream));
        CUDA_TRY(cudaMemcpyAsync(s->pos, s->h_step + 1, sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream));
        cq_status st = enqueue_chunk(s, 1, pos, 1, err);
        if (st) return st;
        CUDA_TRY(cudaMemcpyAsync(s->h_logits, s->logits, V * sizeof(float), cudaMemcpyDeviceToHost, cm->stream));
        CUDA_TRY(cudaStreamSynchronize(cm->stream));
        if (logits) memcpy(logits, s->h_logits, V * sizeof(float));
        return CQ_OK;
    }
    if (!s->decode_graph) {
        cudaGraph_t g;
        CUDA_TRY(cudaStreamBeginCapture(cm->stream, cudaStreamCaptureModeThreadLocal));
        cudaMemcpyAsync(s->tokens, s->h_step, sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream);
        cudaMemcpyAsync(s->pos, s->h_step + 1, sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream);
        cq_status st = enqueue_chunk(s, 1, pos, 1, err);
        cudaMemcpyAsync(s->h_logits, s->logits, V * sizeof(float), cudaMemcpyDeviceToHost, cm->stream);
        cudaError_t e = cudaStreamEndCapture(cm->stream, &g);
        const bool captured = e == cudaSuccess;
        if (!st && captured) e = cudaGraphInstantiate(&s->decode_graph, g, 0);
        if (captured) cudaGraphDestroy(g);
        if (st || e != cudaSuccess) {
            CQ_WARN("decoder: CUDA graph capture failed (%s); decoding without graphs",
                    st ? (err ? err->msg : "") : cudaGetErrorString(e));
            cudaGetLastError(); /* clear the capture error */
            cq_err_clear(err);
            s->decode_graph = NULL;
            s->no_graphs = true;
            return decode_step(s, token, pos, logits, err);
        }
    }
    s->h_step[0] = token;
    s->h_step[1] = pos;
    CUDA_TRY(cudaGraphLaunch(s->decode_graph, cm->stream));
    CUDA_TRY(cudaStreamSynchronize(cm->stream));
    if (logits) memcpy(logits, s->h_logits, V * sizeof(float));
    return CQ_OK;
}

/* A full prefill chunk as a CUDA graph: ~270 launches and cuBLAS calls become one, which matters on a host where
 * each call is slow. Positions come from device memory and the kernels' shapes do not depend on them, so one
 * capture serves every full chunk of the sequence. */
static cq_status prefill_graph_launch(cq_cuda_seq *s, cq_err *err) {
    cq_cuda_model *cm = s->cm;
    if (!s->prefill_graph) {
        cudaGraph_t g;
        CUDA_TRY(cudaStreamBeginCapture(cm->stream, cudaStreamCaptureModeThreadLocal));
        cudaMemcpyAsync(s->tokens, s->h_tokens, CQ_CUDA_BATCH * sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream);
        cudaMemcpyAsync(s->pos, s->h_step + 1, sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream);
        cq_status st = enqueue_chunk(s, CQ_CUDA_BATCH, s->h_step[1], 0, err);
        cudaError_t e = cudaStreamEndCapture(cm->stream, &g);
        const bool captured = e == cudaSuccess;
        if (!st && captured) e = cudaGraphInstantiate(&s->prefill_graph, g, 0);
        if (captured) cudaGraphDestroy(g);
        if (st || e != cudaSuccess) {
            CQ_WARN("decoder: CUDA graph capture failed (%s); running without graphs",
                    st ? (err ? err->msg : "") : cudaGetErrorString(e));
            cudaGetLastError();
            cq_err_clear(err);
            s->prefill_graph = NULL;
            s->no_graphs = true;
            CUDA_TRY(cudaMemcpyAsync(s->tokens, s->h_tokens, CQ_CUDA_BATCH * sizeof(int32_t), cudaMemcpyHostToDevice,
                                     cm->stream));
            CUDA_TRY(cudaMemcpyAsync(s->pos, s->h_step + 1, sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream));
            return enqueue_chunk(s, CQ_CUDA_BATCH, s->h_step[1], 0, err);
        }
    }
    CUDA_TRY(cudaGraphLaunch(s->prefill_graph, cm->stream));
    return CQ_OK;
}

static cq_status forward_chunk(cq_cuda_seq *s, const int32_t *tokens, int T, int32_t pos0, float *logits,
                               bool all_logits, cq_err *err) {
    cq_cuda_model *cm = s->cm;
    if (T == 1) return decode_step(s, tokens[0], pos0, logits, err);
    s->h_step[1] = pos0;
    cq_status st;
    if (T == CQ_CUDA_BATCH && s->full_chunk_seen && !s->no_graphs) {
        memcpy(s->h_tokens, tokens, (size_t)T * sizeof(int32_t));
        st = prefill_graph_launch(s, err);
    } else {
        CUDA_TRY(cudaMemcpyAsync(s->tokens, tokens, (size_t)T * sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream));
        CUDA_TRY(cudaMemcpyAsync(s->pos, s->h_step + 1, sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream));
        st = enqueue_chunk(s, T, pos0, 0, err);
        if (T == CQ_CUDA_BATCH) s->full_chunk_seen = true;
    }
    if (!st && logits) st = copy_logits(s, all_logits ? 0 : T - 1, T, logits, err);
    if (st) return st;
    CUDA_TRY(cudaStreamSynchronize(cm->stream));
    return CQ_OK;
}

extern "C" cq_status cq_cuda_eval(cq_cuda_seq *s, const int32_t *tokens, size_t n, int32_t pos, float *logits,
                                  bool all_logits, cq_err *err) {
    const size_t V = (size_t)s->cm->m->n_vocab;
    for (size_t i = 0; i < n; i += CQ_CUDA_BATCH) {
        int T = n - i < CQ_CUDA_BATCH ? (int)(n - i) : CQ_CUDA_BATCH;
        float *out = NULL;
        if (logits && all_logits) out = logits + i * V;
        else if (logits && i + (size_t)T == n) out = logits;
        cq_status st = forward_chunk(s, tokens + i, T, pos + (int32_t)i, out, all_logits, err);
        if (st) return st;
    }
    return CQ_OK;
}

/* ---- single kernels for the tests ---------------------------------------------------------------------------- */

/* Device copies of host arrays, freed together. */
typedef struct {
    void *p[8];
    int n;
} dev_set;
/* at most 8 buffers per test call */

static void dev_free(dev_set *ds) {
    for (int i = 0; i < ds->n; i++) cudaFree(ds->p[i]);
    ds->n = 0;
}

static cq_status dev_copy(dev_set *ds, const void *host, size_t bytes, void **out, cq_err *err) {
    CUDA_TRY(cudaMalloc(out, bytes ? bytes : 1));
    ds->p[ds->n++] = *out;
    if (host) CUDA_TRY(cudaMemcpy(*out, host, bytes, cudaMemcpyHostToDevice));
    return CQ_OK;
}

extern "C" cq_status cq_cuda_op_rmsnorm(float *out, const float *x, const float *w, int rows, int n, float eps,
                                        cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    dev_set ds = {{0}, 0};
    float *dx, *dw, *dy;
    cq_status s;
    if ((s = dev_copy(&ds, x, (size_t)rows * n * 4, (void **)&dx, err)) || (s = dev_copy(&ds, w, (size_t)n * 4, (void **)&dw, err)) ||
        (s = dev_copy(&ds, NULL, (size_t)rows * n * 4, (void **)&dy, err))) {
        dev_free(&ds);
        return s;
    }
    rmsnorm_kernel<<<rows, 256>>>(dx, dw, dy, n, eps, 0);
    cudaError_t e = cudaMemcpy(out, dy, (size_t)rows * n * 4, cudaMemcpyDeviceToHost);
    dev_free(&ds);
    if (e != cudaSuccess) return cq_err_set(err, CQ_ERR_DEVICE, "rmsnorm: %s", cudaGetErrorString(e));
    return CQ_OK;
}

extern "C" cq_status cq_cuda_op_rope(float *x, int rows, int head_dim, const int32_t *pos, float base,
                                     float freq_scale, cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    /* Runs the fused kernel as rows query heads of one token each, with unit norm weights, so compare against
     * cq_op_rmsnorm (weight 1) followed by cq_op_rope. Positions: one per row, via pos0 = pos[r] per launch. */
    const int half = head_dim / 2;
    double *freq = (double *)malloc((size_t)half * sizeof(double));
    float *ones = (float *)malloc((size_t)head_dim * sizeof(float));
    if (!freq || !ones) {
        free(freq), free(ones);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    rope_freqs(freq, head_dim, base, freq_scale);
    for (int i = 0; i < head_dim; i++) ones[i] = 1.0f;
    dev_set ds = {{0}, 0};
    float *dx, *dw, *dk;
    double *df;
    int32_t *dpos;
    cq_status s;
    if ((s = dev_copy(&ds, x, (size_t)rows * head_dim * 4, (void **)&dx, err)) ||
        (s = dev_copy(&ds, ones, (size_t)head_dim * 4, (void **)&dw, err)) ||
        (s = dev_copy(&ds, freq, (size_t)half * 8, (void **)&df, err)) ||
        (s = dev_copy(&ds, pos, (size_t)rows * sizeof(int32_t), (void **)&dpos, err)) ||
        (s = dev_copy(&ds, NULL, (size_t)head_dim * 4, (void **)&dk, err))) {
        dev_free(&ds);
        free(freq), free(ones);
        return s;
    }
    for (int r = 0; r < rows; r++) /* one query head, no key heads (Hkv = 0 slots) */
        qk_norm_rope_store_kernel<<<1, half>>>(dx + (size_t)r * head_dim, dk, dk, dw, dw, df, dk, dk, 1, 0, head_dim,
                                               dpos + r, 1, 0, 0.0f);
    cudaError_t e = cudaMemcpy(x, dx, (size_t)rows * head_dim * 4, cudaMemcpyDeviceToHost);
    dev_free(&ds);
    free(freq), free(ones);
    if (e != cudaSuccess) return cq_err_set(err, CQ_ERR_DEVICE, "rope: %s", cudaGetErrorString(e));
    return CQ_OK;
}

extern "C" cq_status cq_cuda_op_geglu(float *y, const float *u, int n, cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    dev_set ds = {{0}, 0};
    float *dy, *du;
    cq_status s;
    if ((s = dev_copy(&ds, y, (size_t)n * 4, (void **)&dy, err)) || (s = dev_copy(&ds, u, (size_t)n * 4, (void **)&du, err))) {
        dev_free(&ds);
        return s;
    }
    geglu_kernel<<<blocks_for((size_t)n, 256), 256>>>(dy, du, (size_t)n);
    cudaError_t e = cudaMemcpy(y, dy, (size_t)n * 4, cudaMemcpyDeviceToHost);
    dev_free(&ds);
    if (e != cudaSuccess) return cq_err_set(err, CQ_ERR_DEVICE, "geglu: %s", cudaGetErrorString(e));
    return CQ_OK;
}

extern "C" cq_status cq_cuda_op_attention(const float *q, const float *k, const float *v, int n_q, int n_keys,
                                          int head_dim, int window, float scale, float softcap, float *out,
                                          cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    if (head_dim % 32 || head_dim > 32 * MAX_HD_PER_LANE || n_q > n_keys)
        return cq_err_set(err, CQ_ERR_INVALID, "attention test: bad shape");
    const size_t part_floats = (size_t)n_q * 64 * (head_dim + 2);
    dev_set ds = {{0}, 0};
    float *dq, *dk, *dv, *dp, *dout;
    int32_t pos0 = n_keys - n_q, *dpos;
    cq_status s;
    if ((s = dev_copy(&ds, &pos0, sizeof pos0, (void **)&dpos, err)) ||
        (s = dev_copy(&ds, q, (size_t)n_q * head_dim * 4, (void **)&dq, err)) ||
        (s = dev_copy(&ds, k, (size_t)n_keys * head_dim * 4, (void **)&dk, err)) ||
        (s = dev_copy(&ds, v, (size_t)n_keys * head_dim * 4, (void **)&dv, err)) ||
        (s = dev_copy(&ds, NULL, part_floats * 4, (void **)&dp, err)) ||
        (s = dev_copy(&ds, NULL, (size_t)n_q * head_dim * 4, (void **)&dout, err))) {
        dev_free(&ds);
        return s;
    }
    cq_cuda_model tmp; /* attention() only uses the stream */
    memset(&tmp, 0, sizeof tmp);
    s = attention(&tmp, dq, dk, dv, dp, part_floats, dout, n_q, 1, 1, head_dim, dpos,
                  window > 0 && n_keys > window ? window : n_keys, window, n_keys, 0, scale, softcap, err);
    cudaError_t e = cudaMemcpy(out, dout, (size_t)n_q * head_dim * 4, cudaMemcpyDeviceToHost);
    dev_free(&ds);
    if (!s && e != cudaSuccess) s = cq_err_set(err, CQ_ERR_DEVICE, "attention: %s", cudaGetErrorString(e));
    return s;
}

extern "C" cq_status cq_cuda_op_matmul(const cq_wmat *w, const float *x, int n_tokens, float *y, cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    cq_cuda_model tmp;
    memset(&tmp, 0, sizeof tmp);
    CUBLAS_TRY(cublasCreate(&tmp.blas));
    dmat dw = {NULL, 0, 0};
    dev_set ds = {{0}, 0};
    float *dx, *dy;
    bf16 *dxb;
    cq_status s = upload_matrix(w, &dw, err);
    if (!s) s = dev_copy(&ds, x, (size_t)n_tokens * w->cols * 4, (void **)&dx, err);
    if (!s) s = dev_copy(&ds, NULL, (size_t)n_tokens * w->cols * sizeof(bf16), (void **)&dxb, err);
    if (!s) s = dev_copy(&ds, NULL, (size_t)n_tokens * w->rows * 4, (void **)&dy, err);
    if (!s && n_tokens == 1) s = gemv3(&tmp, &dw, dy, NULL, NULL, NULL, NULL, dx, err); /* the decode kernel */
    if (!s && n_tokens > 1) s = to_bf16(&tmp, dx, dxb, (size_t)n_tokens * w->cols, err);
    if (!s && n_tokens > 1) s = gemm(&tmp, &dw, dxb, n_tokens, dy, err);
    if (!s) {
        cudaError_t e = cudaMemcpy(y, dy, (size_t)n_tokens * w->rows * 4, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) s = cq_err_set(err, CQ_ERR_DEVICE, "matmul: %s", cudaGetErrorString(e));
    }
    dev_free(&ds);
    cudaFree(dw.w);
    cublasDestroy(tmp.blas);
    return s;
}
