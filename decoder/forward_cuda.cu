/* The CUDA forward of Gemma 3 (see forward_cuda.h for the design, decoder/decoder.h for the formulas).
 *
 * Per chunk of T tokens: embed -> per layer { RMSNorm -> q,k,v GEMMs -> QK-norm + RoPE + KV store -> attention ->
 * o GEMM -> post-norm + residual -> RMSNorm -> gate,up GEMMs -> GeGLU -> down GEMM -> post-norm + residual } ->
 * final norm -> logits GEMM (tied embedding). */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern "C" { /* C headers: their functions keep C linkage */
#include "decoder/lora.h"
#include "decoder/model.h"
#include "decoder/quant.h"
#include "core/error.h"
#include "core/log.h"
}
#include "decoder/forward_cuda.h"
#include "core/cuda_check.h"

#define ATT_WARPS 4       /* warps per attention block; their running softmaxes merge in shared memory */
#define MAX_HD_PER_LANE 16 /* head_dim <= 512 */
#define LOGIT_ROWS 64     /* tokens whose logits are computed at once */
#define PREFILL_GRAPHS 8 /* captured prefill chunks kept per sequence */
#define ATT_GEMM_MAX_KEYS 8192 /* prefill attention through cuBLAS up to this many key slots (scores buffer) */

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

/* A batched step's float activations as `planes` bf16 planes for one cuBLAS GEMM over planes x rows (issue 31):
 * plane 0 = bf16(x), plane p = bf16(x - the planes before it), y[p n + i]. Three planes hold a float exactly
 * (8 + 8 + 8 significant bits), so the GEMM's exact bf16 products, accumulated in float, summed over the planes by
 * the consumer kernels (plane_sum), give batch 1's float-input products up to the summation order; one plane is
 * to_bf16_kernel (the GEMM's input rounded to bf16). */
__global__ void to_planes_kernel(const float *x, bf16 *y, size_t n, int planes) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float r = x[i];
    for (int p = 0; p < planes; p++) {
        const bf16 h = __float2bfloat16_rn(r);
        y[(size_t)p * n + i] = h;
        r -= __bfloat162float(h); /* exact: h is r rounded to 8 significant bits */
    }
}

/* Element i of a GEMM's output over `planes` planes, plane p at x + p ps: ((x0 + x1) + x2), the planes' order. */
__device__ __forceinline__ float plane_sum(const float *x, size_t i, int planes, size_t ps) {
    float v = x[i];
    for (int p = 1; p < planes; p++) v += x[i + (size_t)p * ps];
    return v;
}

__device__ __forceinline__ float gelu_tanh_d(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

__device__ __forceinline__ float silu_d(float x) { return x / (1.0f + expf(-x)); }

/* y = act(y) * u: gelu_tanh (GeGLU, gemma3), or silu with silu set (SwiGLU, qwen2); y and u over `planes` planes
 * of n (a batched step's GEMM outputs, see to_planes_kernel: summed first), y's first plane written */
__global__ void geglu_kernel(float *y, const float *u, size_t n, int silu, int planes) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float g = plane_sum(y, i, planes, n), v = plane_sum(u, i, planes, n);
    y[i] = (silu ? silu_d(g) : gelu_tanh_d(g)) * v;
}

/* x = cap tanh(x / cap) (no cap: x), x over `planes` planes of n (a batched step's logits GEMM over the planes of
 * its states, see to_planes_kernel: summed first), the first plane written */
__global__ void softcap_kernel(float *x, size_t n, float cap, int planes) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = plane_sum(x, i, planes, n);
    x[i] = cap > 0 ? cap * tanhf(v / cap) : v;
}

/* The KV cache's elements: float, or bf16 (CLAUSEQA_KV_BF16, cq_cuda_model_set_kv_bf16: half the memory and the
 * bytes attention reads; a value rounded to nearest even as it is stored, as cq_op_round_bf16 does on the CPU). The
 * kernels that read or write the cache take it as void * and are instantiated for both. */
__device__ __forceinline__ float kv_ld(const float *p) { return *p; }
__device__ __forceinline__ float kv_ld(const bf16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void kv_st(float *p, float v) { *p = v; }
__device__ __forceinline__ void kv_st(bf16 *p, float v) { *p = __float2bfloat16_rn(v); }
/* v as a cache of that type holds it */
__device__ __forceinline__ float kv_round(float v, const float *) { return v; }
__device__ __forceinline__ float kv_round(float v, const bf16 *) { return __bfloat162float(__float2bfloat16_rn(v)); }

__global__ void bf16_to_f32_kernel(const bf16 *x, float *y, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = __bfloat162float(x[i]);
}

/* The rows of a batched decode step (cq_cuda_decode_batch): row t is a token of its own sequence, at position
 * pos[t], with that sequence's cache of this layer (k[t], v[t], slots[t] slots). pos NULL: the rows are one
 * sequence's consecutive tokens (a prefill chunk). planes: q, k and v are GEMM outputs over that many planes of
 * the rows (to_planes_kernel; 0 or 1: one), summed as they are read. */
typedef struct {
    const int32_t *pos;
    void *const *k;
    void *const *v;
    const int32_t *slots;
    int planes;
} batch_rows;

/* One block per (token, head slot): slots [0, H) are query heads, [H, H + Hkv) key heads. blockDim = head_dim / 2,
 * thread i owns the RoPE pair (i, i + half). RMSNorm over the head with its weight, then RoPE at position pos0 + t
 * (angle in double: positions reach 32k); keys and their values go to the cache slot of that position. Packed
 * prompts (cq_cuda_score_packed) rotate at their own positions, rope_pos[t], and still store at slot pos0 + t.
 * A batched decode step (br.pos set) takes each row's position and cache from br. */
template <typename KV>
__global__ void qk_norm_rope_store_kernel(float *q, const float *k, const float *v, const float *q_norm,
                                          const float *k_norm, const float *bq, const float *bk, const float *bv,
                                          const double *inv_freq, void *kcache_, void *vcache_,
                                          int H, int Hkv, int hd, const int32_t *pos0p, const int32_t *rope_pos,
                                          int slots, int ring, float eps, batch_rows br) {
    const int t = blockIdx.x / (H + Hkv), hs = blockIdx.x % (H + Hkv), half = hd / 2, i = threadIdx.x;
    /* in device memory, so that a captured decode graph replays at any position */
    const int32_t pos0 = br.pos ? br.pos[t] - t : *pos0p;
    KV *kcache = (KV *)kcache_, *vcache = (KV *)vcache_;
    if (br.pos) kcache = (KV *)br.k[t], vcache = (KV *)br.v[t], slots = br.slots[t];
    const bool is_q = hs < H;
    const float *src = is_q ? q + ((size_t)t * H + hs) * hd : k + ((size_t)t * Hkv + (hs - H)) * hd;
    const float *w = is_q ? q_norm : k_norm;
    const float *bias = is_q ? (bq ? bq + (size_t)hs * hd : NULL) : (bk ? bk + (size_t)(hs - H) * hd : NULL);
    const int T = gridDim.x / (H + Hkv), planes = br.planes > 1 ? br.planes : 1;
    const size_t ps = (size_t)T * (is_q ? H : Hkv) * hd; /* the plane stride of q, or of k and v */
    float x0 = plane_sum(src, i, planes, ps), x1 = plane_sum(src, i + half, planes, ps);
    if (bias) x0 += bias[i], x1 += bias[i + half]; /* qwen2's projection bias, before RoPE */
    if (w) { /* QK-norm (gemma3); none without weights (qwen2) */
        float r = rsqrtf(block_sum(x0 * x0 + x1 * x1) / hd + eps);
        x0 *= r * w[i];
        x1 *= r * w[i + half];
    }
    const int32_t p = pos0 + t;
    double s, c;
    sincos((double)(rope_pos ? rope_pos[t] : p) * inv_freq[i], &s, &c);
    float cf = (float)c, sf = (float)s;
    float y0 = x0 * cf - x1 * sf, y1 = x1 * cf + x0 * sf;
    if (is_q) {
        float *dst = q + ((size_t)t * H + hs) * hd;
        dst[i] = y0;
        dst[i + half] = y1;
    } else {
        const int kvh = hs - H;
        const size_t slot = ring ? (size_t)(p % slots) : (size_t)p;
        KV *kd = kcache + (slot * Hkv + kvh) * hd, *vd = vcache + (slot * Hkv + kvh) * hd;
        const float *vs = v + ((size_t)t * Hkv + kvh) * hd;
        kv_st(kd + i, y0);
        kv_st(kd + i + half, y1);
        const float *vb = bv ? bv + (size_t)kvh * hd : NULL;
        kv_st(vd + i, plane_sum(vs, i, planes, ps) + (vb ? vb[i] : 0.0f));
        kv_st(vd + i + half, plane_sum(vs, i + half, planes, ps) + (vb ? vb[i + half] : 0.0f));
    }
}

/* Packed prompts (cq_cuda_score_packed) whose first tokens are another prompt's: token t's keys are its prompt's own
 * rows [own, t] and, when c = pre_len[t] > 0, the c rows of the shared prefix stored in the leader's block at
 * [pre, pre + c) (pre = pre_start[t]). Positions in the prompt (virtual keys): v < c is row pre + v, v >= c row
 * own + v - c; the token itself is at c + t - own. */
typedef struct {
    const int32_t *own, *pre_start, *pre_len; /* own NULL: not packed */
} packed_keys;
static const packed_keys NOT_PACKED = {NULL, NULL, NULL};

/* One online-softmax step of a warp over KG keys: sc holds the lane's partial dot products of the query with them
 * (keys j0 + g >= b are masked), vals the lane's dimensions of their values; folds them into (m, l, acc). */
template <int KG, int N>
__device__ __forceinline__ void softmax_step(float (&sc)[KG], const float (&vals)[KG][N], int32_t j0, int32_t b,
                                             float scale, float softcap, float &m, float &l, float (&acc)[N]) {
    float gmax = -INFINITY;
#pragma unroll
    for (int g = 0; g < KG; g++) {
        float v = warp_sum(sc[g]) * scale;
        if (softcap > 0) v = softcap * tanhf(v / softcap);
        sc[g] = j0 + g < b ? v : -INFINITY;
        gmax = fmaxf(gmax, sc[g]);
    }
    float m_new = fmaxf(m, gmax), corr = expf(m - m_new), esum = 0;
#pragma unroll
    for (int i = 0; i < N; i++) acc[i] *= corr;
#pragma unroll
    for (int g = 0; g < KG; g++) {
        float e = expf(sc[g] - m_new); /* 0 for a masked key */
        esum += e;
#pragma unroll
        for (int i = 0; i < N; i++) acc[i] += e * vals[g][i];
    }
    l = l * corr + esum;
    m = m_new;
}

/* The warps' running softmaxes (m, l, the lane's per dimensions of acc) to shared memory, then merged: the block's
 * max M, sum L and each warp's weight (the caller sums sm_acc[w][d] * wgt[w]). Block-wide. */
template <int N>
__device__ __forceinline__ void merge_warps(float m, float l, const float (&acc)[N], int per,
                                            float (&sm_ml)[ATT_WARPS][2], float (&sm_acc)[ATT_WARPS][32 * N], float &M,
                                            float &L, float (&wgt)[ATT_WARPS]) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) sm_ml[warp][0] = m, sm_ml[warp][1] = l;
#pragma unroll
    for (int i = 0; i < N; i++)
        if (i < per) sm_acc[warp][lane * per + i] = acc[i];
    __syncthreads();
    M = -INFINITY, L = 0;
    for (int w = 0; w < ATT_WARPS; w++) M = fmaxf(M, sm_ml[w][0]);
    for (int w = 0; w < ATT_WARPS; w++) {
        wgt[w] = M == -INFINITY ? 0.0f : expf(sm_ml[w][0] - M);
        L += sm_ml[w][1] * wgt[w];
    }
}

/* Attention, pass 1. Grid (T*H, n_split), ATT_WARPS warps per block. Query (t, h) at position p sees keys
 * [lo, p] (lo = p - window + 1 on local layers; positions in its own prompt for packed prompts, see packed_keys); split s
 * takes a contiguous share of them, and the warps of the block take groups of KEY_GROUP consecutive keys in turn
 * (the loads of a group are in flight together), each keeping a running max m, sum l and weighted values (online
 * softmax). Lanes hold head_dim/32 consecutive dimensions. The warps merge in shared memory and the block writes one partial (m, l, acc) for pass 2. */
#define KEY_GROUP 4
/* Decode attention: shares of about DEC_SPLIT_KEYS keys, so that a short range still spreads over many blocks; at
 * most DEC_MAX_SPLITS (one per thread of the merging block), merged MERGE_GROUP splits a warp at a time. */
#define DEC_SPLIT_KEYS 32
#define DEC_MAX_SPLITS (32 * ATT_WARPS)
#define MERGE_GROUP 4
template <typename KV>
__global__ void attention_partial_kernel(const float *q, const void *kcache_, const void *vcache_, float *part, int H,
                                         int Hkv, int hd, const int32_t *pos0p, packed_keys pk, int window,
                                         int slots, int ring, float scale, float softcap, batch_rows br) {
    __shared__ float sm_ml[ATT_WARPS][2];
    __shared__ float sm_acc[ATT_WARPS][32 * MAX_HD_PER_LANE];
    const int th = blockIdx.x, t = th / H, h = th % H, kvh = h / (H / Hkv);
    const int32_t pos0 = br.pos ? br.pos[t] - t : *pos0p; /* a batched step: row t at br.pos[t], its own cache */
    const KV *kcache = (const KV *)kcache_, *vcache = (const KV *)vcache_;
    if (br.pos) kcache = (const KV *)br.k[t], vcache = (const KV *)br.v[t], slots = br.slots[t];
    const int split = blockIdx.y, n_split = gridDim.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int per = hd / 32;
    /* keys by position in the token's sequence or prompt (virtual, see packed_keys): [lo, p] */
    const int32_t own = pk.own ? pk.own[t] : 0, c = pk.pre_len ? pk.pre_len[t] : 0, pre = c ? pk.pre_start[t] : 0;
    const int32_t p = pk.own ? c + pos0 + t - own : pos0 + t, lo = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
    const int32_t n = p - lo + 1, share = (n + n_split - 1) / n_split;
    const int32_t a = lo + split * share, b = min(p + 1, a + share);
    float qv[MAX_HD_PER_LANE], acc[MAX_HD_PER_LANE];
    const float *qr = q + ((size_t)t * H + h) * hd + lane * per;
#pragma unroll
    for (int i = 0; i < MAX_HD_PER_LANE; i++) qv[i] = i < per ? qr[i] : 0.0f, acc[i] = 0;
    float m = -INFINITY, l = 0;
    for (int32_t j0 = a + warp * KEY_GROUP; j0 < b; j0 += ATT_WARPS * KEY_GROUP) {
        float sc[KEY_GROUP], vals[KEY_GROUP][MAX_HD_PER_LANE];
#pragma unroll
        for (int g = 0; g < KEY_GROUP; g++) {
            int32_t j = j0 + g < b ? j0 + g : j0; /* past the share: recompute key j0, masked below */
            const int32_t slot = pk.own ? (j < c ? pre + j : own + j - c) : ring ? j % slots : j;
            const size_t row = ((size_t)slot * Hkv + kvh) * hd + lane * per;
            float d = 0;
#pragma unroll
            for (int i = 0; i < MAX_HD_PER_LANE; i++) {
                if (i < per) d += qv[i] * kv_ld(kcache + row + i);
                vals[g][i] = i < per ? kv_ld(vcache + row + i) : 0.0f;
            }
            sc[g] = d;
        }
        softmax_step(sc, vals, j0, b, scale, softcap, m, l, acc);
    }
    float M, L, wgt[ATT_WARPS];
    merge_warps(m, l, acc, per, sm_ml, sm_acc, M, L, wgt);
    float *out = part + ((size_t)th * n_split + split) * (hd + 2);
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

/* max over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result */
__device__ float block_max(float v) {
    __shared__ float part[32];
    __shared__ float total;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float s = lane < (int)(blockDim.x / 32) ? part[lane] : -INFINITY;
        for (int o = 16; o > 0; o >>= 1) s = fmaxf(s, __shfl_xor_sync(0xffffffffu, s, o));
        if (lane == 0) total = s;
    }
    __syncthreads();
    float r = total;
    __syncthreads();
    return r;
}

/* Prefill attention through cuBLAS: scores S = Q K^T for the chunk's T queries of every head against nk cache
 * slots come from one GEMM; this kernel turns row (h, t) of S into softmax weights in place: scale, soft-cap,
 * mask (slot j holds position key0 + j, or on a ring of `slots` the latest position <= the chunk's last that falls
 * in slot j; query t at p = pos0 + t sees positions (p - window, p]; packed, the keys of packed_keys by their
 * positions in t's prompt),
 * softmax. A second GEMM gives P V. */
__global__ void att_softmax_kernel(float *sc, int T, int nk, const int32_t *pos0p, packed_keys pk,
                                   int32_t key0, int window, int slots, int ring, float scale, float softcap) {
    float *r = sc + (size_t)blockIdx.x * nk;
    const int t = (int)(blockIdx.x % T);
    const int32_t pos0 = *pos0p, p = pos0 + t, last = pos0 + T - 1;
    /* packed (pk.own): slot j is a key of token t at its position in t's prompt (see packed_keys), or none */
    const int32_t own = pk.own ? pk.own[t] : 0, c = pk.pre_len ? pk.pre_len[t] : 0, pre = c ? pk.pre_start[t] : 0;
    const int32_t vp = pk.own ? c + p - own : p;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < nk; j += blockDim.x) {
        const int32_t pj = ring ? last - (last - j) % slots : key0 + j;
        const int32_t vj = !pk.own ? pj : pj >= own ? c + pj - own : (pj >= pre && pj < pre + c) ? pj - pre : -1;
        float v = -INFINITY;
        if (pj <= p && vj >= 0 && (window <= 0 || vj > vp - window)) {
            v = r[j] * scale;
            if (softcap > 0) v = softcap * tanhf(v / softcap);
        }
        r[j] = v;
        mx = fmaxf(mx, v);
    }
    mx = block_max(mx);
    float sum = 0;
    for (int j = threadIdx.x; j < nk; j += blockDim.x) {
        float e = expf(r[j] - mx); /* 0 for a masked slot */
        r[j] = e;
        sum += e;
    }
    const float inv = 1.0f / block_sum(sum);
    for (int j = threadIdx.x; j < nk; j += blockDim.x) r[j] *= inv;
}

/* ---- the decode step (one token) ------------------------------------------------------------------------------
 * Five kernels a layer: q/k/v products; attention (QK-norm, RoPE, the new key stored, partials over a share of the
 * keys, and the last block of a head merging them); o product; gate/up products with GeGLU; down product. The
 * residual add and the next RMSNorm run in the prologue of the product that needs their result (each block
 * recomputes them from 2 x n_embd floats; block 0 writes the new residual to the other of two buffers), and the
 * logits product ends with the soft-cap and a packed atomicMax, so greedy decoding copies 8 bytes, not the logits.
 * Each kernel first loads its weights into registers, then waits for the kernel before it (programmatic dependent
 * launch on sm_90: the next kernel's weight loads overlap this one's tail). */

__device__ __forceinline__ void pdl_wait(void) { /* no-op unless launched with programmatic serialization */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_next(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

enum { PRO_COPY = 0, PRO_EMBED = 1, PRO_ADDNORM = 2 };

/* What a decode product multiplies, built in shared memory by every block:
 *   COPY:    xs = xin
 *   EMBED:   v = emb[token] * emb_scale;                    xs = RMSNorm(v) * w_next
 *   ADDNORM: v = xin + RMSNorm(o) * w_post (the residual);  xs = RMSNorm(v) * w_next
 * with v written to xout by block 0 when xout is set. best, when set, is zeroed (by block 0) for the argmax.
 * bf16_act: xs rounded to bf16 at the end, as the batched step's and the prefill's cuBLAS GEMMs take their inputs
 * (CLAUSEQA_DECODE_BF16_ACT=1, an experiment of issue 31; the products only, never the logits' prologue). */
typedef struct {
    int mode, n, bf16_act;
    float eps, emb_scale;
    const float *xin, *o, *w_post, *w_next;
    float *xout;
    const int32_t *token;
    const bf16 *emb;
    unsigned long long *best;
} dpro;

/* Copies NV float vectors of n floats (n a multiple of 4) from global to shared memory with 16-byte accesses, the
 * loads of U float4 per thread per vector all in flight before the first store. */
template <int NV, int U>
__device__ __forceinline__ void load_vecs(const float *const (&src)[NV], float *const (&dst)[NV], int n) {
    const int step = blockDim.x * 4;
    for (int base = threadIdx.x * 4; base < n; base += step * U) {
        float4 v[NV][U];
#pragma unroll
        for (int k = 0; k < NV; k++)
#pragma unroll
            for (int u = 0; u < U; u++)
                if (base + u * step < n) v[k][u] = *(const float4 *)(src[k] + base + u * step);
#pragma unroll
        for (int k = 0; k < NV; k++)
#pragma unroll
            for (int u = 0; u < U; u++)
                if (base + u * step < n) *(float4 *)(dst[k] + base + u * step) = v[k][u];
    }
}

/* Builds xs[0, n); EMBED and ADDNORM stage their inputs in xs[n, 5n) (see pro_smem). */
__device__ void prologue(const dpro &p, float *xs) {
    const int n = p.n;
    if (p.best && blockIdx.x == 0 && threadIdx.x == 0) *p.best = 0;
    if (p.mode == PRO_COPY) {
        const float *src[1] = {p.xin};
        float *const dst[1] = {xs};
        load_vecs<1, 4>(src, dst, n);
        __syncthreads();
        if (p.bf16_act) {
            for (int i = threadIdx.x; i < n; i += blockDim.x) xs[i] = __bfloat162float(__float2bfloat16(xs[i]));
            __syncthreads();
        }
        return;
    }
    float *so = xs + n, *sx = xs + 2 * n, *swp = xs + 3 * n, *swn = xs + 4 * n;
    float ss = 0;
    if (p.mode == PRO_EMBED) {
        const float *src[1] = {p.w_next};
        float *const dst[1] = {swn};
        load_vecs<1, 4>(src, dst, n);
        const bf16 *e = p.emb + (size_t)*p.token * n;
        for (int i = threadIdx.x * 8; i < n; i += blockDim.x * 8) {
            uint4 raw = *(const uint4 *)(e + i);
            const __nv_bfloat162 *h = (const __nv_bfloat162 *)&raw;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                float2 f = __bfloat1622float2(h[k]);
                float a = f.x * p.emb_scale, b = f.y * p.emb_scale;
                xs[i + 2 * k] = a, xs[i + 2 * k + 1] = b;
                ss += a * a + b * b;
            }
        }
        __syncthreads();
    } else {
        const float *src[4] = {p.o, p.xin, p.w_post ? p.w_post : p.o, p.w_next}; /* no w_post: a plain sum */
        float *const dst[4] = {so, sx, swp, swn};
        load_vecs<4, 2>(src, dst, n);
        __syncthreads();
        float so2 = 0;
        for (int i = threadIdx.x; i < n; i += blockDim.x) so2 += so[i] * so[i];
        float r = rsqrtf(block_sum(so2) / n + p.eps);
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            float v = sx[i] + (p.w_post ? so[i] * r * swp[i] : so[i]);
            xs[i] = v;
            ss += v * v;
        }
    }
    float r = rsqrtf(block_sum(ss) / n + p.eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) { /* each thread rereads only its own elements */
        if (p.xout && blockIdx.x == 0) p.xout[i] = xs[i];
        const float y = xs[i] * r * swn[i];
        xs[i] = p.bf16_act ? __bfloat162float(__float2bfloat16(y)) : y;
    }
    __syncthreads();
}

/* A warp's share of one weight row: lane l holds bf16 weights [base + 8l + 256k, +8) for k < IT (16-byte loads). */
template <int IT> struct wrow {
    uint4 v[IT];
};

template <int IT> __device__ __forceinline__ void wrow_load(wrow<IT> &r, const bf16 *w, int base, int cols, int lane) {
#pragma unroll
    for (int k = 0; k < IT; k++) {
        int i = base + lane * 8 + k * 256;
        r.v[k] = i < cols ? __ldg((const uint4 *)(w + i)) : make_uint4(0, 0, 0, 0);
    }
}

template <int IT>
__device__ __forceinline__ float wrow_dot(const wrow<IT> &r, const float *xs, int base, int cols, int lane) {
    float s = 0;
#pragma unroll
    for (int k = 0; k < IT; k++) {
        int i = base + lane * 8 + k * 256;
        if (i < cols) {
            const __nv_bfloat162 *h = (const __nv_bfloat162 *)&r.v[k];
            float4 x0 = *(const float4 *)(xs + i), x1 = *(const float4 *)(xs + i + 4);
            float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]), c = __bfloat1622float2(h[2]),
                   d = __bfloat1622float2(h[3]);
            s += a.x * x0.x + a.y * x0.y + b.x * x0.z + b.y * x0.w + c.x * x1.x + c.y * x1.y + d.x * x1.z + d.y * x1.w;
        }
    }
    return s;
}

/* Row w . xs (summed over the warp), the first IT x 256 columns already in `first`. */
template <int IT>
__device__ __forceinline__ float wrow_finish(const wrow<IT> &first, const bf16 *w, const float *xs, int cols,
                                             int lane) {
    float s = wrow_dot(first, xs, 0, cols, lane);
    for (int base = IT * 256; base < cols; base += IT * 256) {
        wrow<IT> r;
        wrow_load(r, w, base, cols, lane);
        s += wrow_dot(r, xs, base, cols, lane);
    }
    return warp_sum(s);
}

#define DEC_WARPS 4 /* rows (one per warp) per block of a decode product */

/* y[r] = W[r] . xs for up to three matrices stacked by rows (q, k, v share one launch); xs from the prologue. */
template <int IT>
__global__ void __launch_bounds__(32 * DEC_WARPS)
    dec_mv_kernel(const bf16 *w0, int r0, float *y0, const bf16 *w1, int r1, float *y1, const bf16 *w2, int r2,
                  float *y2, int cols, dpro pro) {
    extern __shared__ float xs[];
    const int lane = threadIdx.x % 32;
    int row = blockIdx.x * DEC_WARPS + threadIdx.x / 32;
    const bf16 *w = NULL;
    float *y = NULL;
    if (row < r0) w = w0, y = y0;
    else if ((row -= r0) < r1) w = w1, y = y1;
    else if ((row -= r1) < r2) w = w2, y = y2;
    wrow<IT> first;
    if (w) wrow_load(first, w + (size_t)row * cols, 0, cols, lane);
    pdl_wait();
    pdl_launch_next();
    prologue(pro, xs);
    if (!w) return;
    float v = wrow_finish(first, w + (size_t)row * cols, xs, cols, lane);
    if (lane == 0) y[row] = v;
}

/* y[r] = gelu(Wg[r] . xs) * (Wu[r] . xs), or silu(...) * (...) with silu set (qwen2) */
template <int IT>
__global__ void __launch_bounds__(32 * DEC_WARPS)
    dec_geglu_kernel(const bf16 *wg, const bf16 *wu, int rows, int cols, float *y, dpro pro, int silu) {
    extern __shared__ float xs[];
    const int lane = threadIdx.x % 32, row = blockIdx.x * DEC_WARPS + threadIdx.x / 32;
    wrow<IT> fg, fu;
    if (row < rows) wrow_load(fg, wg + (size_t)row * cols, 0, cols, lane), wrow_load(fu, wu + (size_t)row * cols, 0, cols, lane);
    pdl_wait();
    pdl_launch_next();
    prologue(pro, xs);
    if (row >= rows) return;
    float g = wrow_finish(fg, wg + (size_t)row * cols, xs, cols, lane);
    float u = wrow_finish(fu, wu + (size_t)row * cols, xs, cols, lane);
    if (lane == 0) y[row] = (silu ? silu_d(g) : gelu_tanh_d(g)) * u;
}

/* An order-preserving key for (logit, row): larger logit first, then the smaller row (the host's first maximum). */
__device__ __forceinline__ unsigned long long argmax_key(float v, int row) {
    unsigned u = __float_as_uint(v);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)u << 32) | (0xffffffffu - (unsigned)row);
}

#define LOGIT_WARPS 8
#define LOGIT_GROUP 4 /* rows of a warp whose loads are in flight together */

/* Logits of the tied embedding E (rows x cols) against xs: soft-capped (softcap > 0), written to logits if set,
 * and their argmax folded into *best (packed by argmax_key) if set. A persistent grid (as many blocks as fit at
 * once): each block builds xs once, its warps take LOGIT_GROUP rows at a time. */
template <int IT>
__global__ void __launch_bounds__(32 * LOGIT_WARPS)
    dec_logits_kernel(const bf16 *E, int rows, int cols, dpro pro, float softcap, float *logits,
                      unsigned long long *best) {
    extern __shared__ float xs[];
    __shared__ unsigned long long wbest[LOGIT_WARPS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int stride = gridDim.x * LOGIT_WARPS * LOGIT_GROUP;
    int row0 = (blockIdx.x * LOGIT_WARPS + warp) * LOGIT_GROUP;
    wrow<IT> w[LOGIT_GROUP];
#pragma unroll
    for (int j = 0; j < LOGIT_GROUP; j++)
        if (row0 + j < rows) wrow_load(w[j], E + (size_t)(row0 + j) * cols, 0, cols, lane);
    pdl_wait();
    pdl_launch_next();
    prologue(pro, xs);
    unsigned long long mine = 0;
    for (bool first = true; row0 < rows; row0 += stride, first = false) {
        if (!first) {
#pragma unroll
            for (int j = 0; j < LOGIT_GROUP; j++)
                if (row0 + j < rows) wrow_load(w[j], E + (size_t)(row0 + j) * cols, 0, cols, lane);
        }
#pragma unroll
        for (int j = 0; j < LOGIT_GROUP; j++) {
            const int row = row0 + j;
            if (row >= rows) break;
            float v = wrow_finish(w[j], E + (size_t)row * cols, xs, cols, lane);
            if (softcap > 0) v = softcap * tanhf(v / softcap);
            if (logits && lane == 0) logits[row] = v;
            unsigned long long k = argmax_key(v, row);
            mine = k > mine ? k : mine;
        }
    }
    if (!best) return;
    if (lane == 0) wbest[warp] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < LOGIT_WARPS; i++) mine = wbest[i] > mine ? wbest[i] : mine;
        atomicMax(best, mine);
    }
}

#define ROPE_PAIRS (32 * MAX_HD_PER_LANE / 2 / (32 * ATT_WARPS)) /* RoPE pairs per thread, head_dim <= 512 */

/* The same from a Q8_0 embedding kept as in the file (int8 weights, one fp16 scale per 32; half the bytes of bf16,
 * and exact): q (rows x cols) int8, d (rows x cols / 32) fp16. Eight lanes a row, IT = cols / 128 16-byte loads
 * each, so a warp takes 4 rows at a time; the next 4 rows' loads are issued before the current ones are used. */
/* Signed byte k of w as a float, exactly, without the quarter-rate integer conversion: the byte, offset by 128,
 * becomes the low mantissa bits of 2^23 (one byte permute), and one subtraction removes 2^23 + 128. */
__device__ __forceinline__ float i8_at(unsigned w, int k) {
    const unsigned u = __byte_perm(w ^ 0x80808080u, 0x4b000000u, 0x7440u + (unsigned)k);
    return __uint_as_float(u) - 8388736.0f;
}

template <int IT>
__device__ __forceinline__ void q8_load(uint4 (&w)[IT], float (&sc)[IT], const int8_t *Q, const __half *Dsc, int row,
                                        int rows, int cols, int sub) {
#pragma unroll
    for (int k = 0; k < IT; k++) {
        const int idx = sub + 8 * k; /* weights [16 idx, 16 idx + 16) of the row, scale block idx / 2 */
        w[k] = row < rows ? __ldg((const uint4 *)(Q + (size_t)row * cols) + idx) : make_uint4(0, 0, 0, 0);
        sc[k] = row < rows ? __half2float(Dsc[(size_t)row * (cols / 32) + idx / 2]) : 0.0f;
    }
}

template <int IT>
__global__ void __launch_bounds__(32 * LOGIT_WARPS)
    dec_logits_q8_kernel(const int8_t *Q, const __half *Dsc, int rows, int cols, dpro pro, float softcap,
                         float *logits, unsigned long long *best) {
    extern __shared__ float xs[];
    __shared__ unsigned long long wbest[LOGIT_WARPS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, sub = lane % 8, quad = lane / 8;
    const int stride = gridDim.x * LOGIT_WARPS * 4;
    int row0 = (blockIdx.x * LOGIT_WARPS + warp) * 4;
    uint4 w[IT], wn[IT];
    float sc[IT], sn[IT];
    q8_load(w, sc, Q, Dsc, row0 + quad, rows, cols, sub);
    pdl_wait();
    pdl_launch_next();
    prologue(pro, xs);
    /* xs again, swizzled for the products below: float4 e of the 16 columns of piece idx at float4
     * 4 idx + (e ^ ((idx >> 1) & 3)), so that the 8 lanes of a quarter warp, reading the same e of pieces
     * sub + 8 k, hit 8 different groups of 4 banks (in xs they would hit 2: a 4-way conflict, 16-way counting the
     * warp's 4 rows, which made this kernel wait on shared memory rather than on its weights) */
    float4 *xw = (float4 *)(xs + 5 * cols);
    for (int i = threadIdx.x; i < cols / 4; i += blockDim.x)
        xw[(i & ~3) + ((i & 3) ^ ((i >> 3) & 3))] = ((const float4 *)xs)[i];
    __syncthreads();
    const int swz = (sub >> 1) & 3;
    unsigned long long mine = 0;
    for (; row0 < rows; row0 += stride) {
        if (row0 + stride < rows) q8_load(wn, sn, Q, Dsc, row0 + stride + quad, rows, cols, sub);
        float s = 0;
#pragma unroll
        for (int k = 0; k < IT; k++) {
            const float4 *x = xw + 4 * (sub + 8 * k);
            const unsigned q[4] = {w[k].x, w[k].y, w[k].z, w[k].w};
            float dsum = 0;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float4 xv = x[e ^ swz];
                dsum += i8_at(q[e], 0) * xv.x + i8_at(q[e], 1) * xv.y + i8_at(q[e], 2) * xv.z + i8_at(q[e], 3) * xv.w;
            }
            s += sc[k] * dsum;
        }
        s += __shfl_xor_sync(0xffffffffu, s, 4);
        s += __shfl_xor_sync(0xffffffffu, s, 2);
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        const int row = row0 + quad;
        if (row < rows) {
            if (softcap > 0) s = softcap * tanhf(s / softcap);
            if (logits && sub == 0) logits[row] = s;
            unsigned long long key = argmax_key(s, row);
            mine = key > mine ? key : mine;
        }
#pragma unroll
        for (int k = 0; k < IT; k++) w[k] = wn[k], sc[k] = sn[k];
    }
    if (!best) return;
    for (int o = 16; o > 0; o >>= 1) {
        unsigned long long other = __shfl_xor_sync(0xffffffffu, mine, o);
        mine = other > mine ? other : mine;
    }
    if (lane == 0) wbest[warp] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < LOGIT_WARPS; i++) mine = wbest[i] > mine ? wbest[i] : mine;
        atomicMax(best, mine);
    }
}

/* The logits of n rows of final-normed states x (n, cols) with the weights and the float products of the decode
 * step's logits kernels (Q8_0 as stored when the output matrix suits dec_logits_q8_kernel, else its bf16 copy): a
 * batched step's rows then get batch 1's logits, log-sum-exp and candidates up to the summation order, where the
 * cuBLAS GEMM used before rounded x to bf16 and read the bf16 copy of a Q8_0 matrix (issue 31). Grid (blocks,
 * ceil(n / ROWS_X)): block y copies states [y ROWS_X, + ROWS_X) to shared memory (swizzled as in the Q8_0 kernel),
 * and its warps take weight rows in turn (four a warp for Q8_0, one for bf16), each weight read once per group of
 * ROWS_X states. logits (n, rows) row-major, soft-capped when softcap > 0. */
#define ROWS_X 8
static size_t rows_logits_smem(int cols) { return (size_t)ROWS_X * cols * sizeof(float); }

template <int IT>
__global__ void __launch_bounds__(32 * LOGIT_WARPS)
    rows_logits_q8_kernel(const int8_t *Q, const __half *Dsc, int rows, int cols, const float *x, int n,
                          float softcap, float *logits) {
    extern __shared__ float xs[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, sub = lane % 8, quad = lane / 8;
    const int x0 = blockIdx.y * ROWS_X, nx = min(ROWS_X, n - x0);
    for (int r = 0; r < nx; r++) { /* cols is a multiple of 128: rows of float4 */
        const float4 *src = (const float4 *)(x + (size_t)(x0 + r) * cols);
        float4 *xw = (float4 *)(xs + (size_t)r * cols);
        for (int i = threadIdx.x; i < cols / 4; i += blockDim.x) xw[(i & ~3) + ((i & 3) ^ ((i >> 3) & 3))] = src[i];
    }
    __syncthreads();
    const int swz = (sub >> 1) & 3, stride = gridDim.x * LOGIT_WARPS * 4;
    for (int row0 = (blockIdx.x * LOGIT_WARPS + warp) * 4; row0 < rows; row0 += stride) {
        uint4 w[IT];
        float sc[IT], s[ROWS_X];
        q8_load(w, sc, Q, Dsc, row0 + quad, rows, cols, sub);
#pragma unroll
        for (int r = 0; r < ROWS_X; r++) s[r] = 0;
#pragma unroll
        for (int k = 0; k < IT; k++) {
            const unsigned q[4] = {w[k].x, w[k].y, w[k].z, w[k].w};
            float wf[16];
#pragma unroll
            for (int e = 0; e < 4; e++)
#pragma unroll
                for (int c = 0; c < 4; c++) wf[4 * e + c] = i8_at(q[e], c);
#pragma unroll
            for (int r = 0; r < ROWS_X; r++) {
                if (r >= nx) break; /* the same for the whole block */
                const float4 *xr = (const float4 *)(xs + (size_t)r * cols) + 4 * (sub + 8 * k);
                float dsum = 0;
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float4 xv = xr[e ^ swz];
                    dsum += wf[4 * e] * xv.x + wf[4 * e + 1] * xv.y + wf[4 * e + 2] * xv.z + wf[4 * e + 3] * xv.w;
                }
                s[r] += sc[k] * dsum;
            }
        }
        const int row = row0 + quad;
#pragma unroll
        for (int r = 0; r < ROWS_X; r++) {
            float v = s[r];
            v += __shfl_xor_sync(0xffffffffu, v, 4);
            v += __shfl_xor_sync(0xffffffffu, v, 2);
            v += __shfl_xor_sync(0xffffffffu, v, 1);
            if (softcap > 0) v = softcap * tanhf(v / softcap);
            if (r < nx && row < rows && sub == 0) logits[(size_t)(x0 + r) * rows + row] = v;
        }
    }
}

/* The same with bf16 weights E (rows x cols, cols a multiple of 8): a warp a row, lane l the weights [8 l + 256 k,
 * + 8), as dec_logits_kernel. */
__global__ void __launch_bounds__(32 * LOGIT_WARPS)
    rows_logits_bf16_kernel(const bf16 *E, int rows, int cols, const float *x, int n, float softcap, float *logits) {
    extern __shared__ float xs[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int x0 = blockIdx.y * ROWS_X, nx = min(ROWS_X, n - x0);
    for (int i = threadIdx.x; i < nx * cols; i += blockDim.x) xs[i] = x[(size_t)x0 * cols + i];
    __syncthreads();
    for (int row = blockIdx.x * LOGIT_WARPS + warp; row < rows; row += gridDim.x * LOGIT_WARPS) {
        float s[ROWS_X];
#pragma unroll
        for (int r = 0; r < ROWS_X; r++) s[r] = 0;
        for (int i = lane * 8; i < cols; i += 256) {
            const uint4 raw = __ldg((const uint4 *)(E + (size_t)row * cols + i));
            const __nv_bfloat162 *h = (const __nv_bfloat162 *)&raw;
            const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]), c = __bfloat1622float2(h[2]),
                         d = __bfloat1622float2(h[3]);
#pragma unroll
            for (int r = 0; r < ROWS_X; r++) {
                if (r >= nx) break;
                const float4 x0v = *(const float4 *)(xs + (size_t)r * cols + i),
                             x1v = *(const float4 *)(xs + (size_t)r * cols + i + 4);
                s[r] += a.x * x0v.x + a.y * x0v.y + b.x * x0v.z + b.y * x0v.w + c.x * x1v.x + c.y * x1v.y +
                        d.x * x1v.z + d.y * x1v.w;
            }
        }
#pragma unroll
        for (int r = 0; r < ROWS_X; r++) {
            float v = warp_sum(s[r]);
            if (softcap > 0) v = softcap * tanhf(v / softcap);
            if (r < nx && lane == 0) logits[(size_t)(x0 + r) * rows + row] = v;
        }
    }
}

/* The RoPE rotation of this thread's pairs (i, i + half), i = threadIdx.x + k blockDim.x, at position p. */
struct rope_pairs {
    float w[ROPE_PAIRS][2], c[ROPE_PAIRS], s[ROPE_PAIRS], x[ROPE_PAIRS][2];
};

__device__ __forceinline__ void rope_setup(rope_pairs &r, const float *w, const double *inv_freq, int32_t p, int hd) {
    const int half = hd / 2;
#pragma unroll
    for (int k = 0; k < ROPE_PAIRS; k++) {
        const int i = threadIdx.x + k * blockDim.x;
        r.w[k][0] = r.w[k][1] = r.c[k] = r.s[k] = 0;
        if (i < half) {
            r.w[k][0] = w ? w[i] : 1.0f, r.w[k][1] = w ? w[i + half] : 1.0f; /* no QK-norm: weight 1, see rope_finish */
            double sd, cd;
            sincos((double)p * inv_freq[i], &sd, &cd);
            r.c[k] = (float)cd, r.s[k] = (float)sd;
        }
    }
}

/* the head's raw projection plus its bias (NULL: none) */
__device__ __forceinline__ void rope_load(rope_pairs &r, const float *src, const float *bias, int hd) {
    const int half = hd / 2;
#pragma unroll
    for (int k = 0; k < ROPE_PAIRS; k++) {
        const int i = threadIdx.x + k * blockDim.x;
        r.x[k][0] = i < half ? src[i] + (bias ? bias[i] : 0.0f) : 0.0f;
        r.x[k][1] = i < half ? src[i + half] + (bias ? bias[i + half] : 0.0f) : 0.0f;
    }
}

__device__ __forceinline__ float rope_ss(const rope_pairs &r) {
    float ss = 0;
#pragma unroll
    for (int k = 0; k < ROPE_PAIRS; k++) ss += r.x[k][0] * r.x[k][0] + r.x[k][1] * r.x[k][1];
    return ss;
}

__device__ __forceinline__ void rope_apply(const rope_pairs &r, float rs, int hd, float *dst) {
    const int half = hd / 2;
#pragma unroll
    for (int k = 0; k < ROPE_PAIRS; k++) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i >= half) continue;
        float x0 = r.x[k][0] * (rs * r.w[k][0]), x1 = r.x[k][1] * (rs * r.w[k][1]);
        dst[i] = x0 * r.c[k] - x1 * r.s[k];
        dst[i + half] = x1 * r.c[k] + x0 * r.s[k];
    }
}

/* RMSNorm of the query head (weights in rq) then RoPE into qdst, and the same for the key head into kdst when
 * with_k, the two norms' sums in one block reduction; block-wide (ends with a barrier). */
__device__ __forceinline__ void rope_finish(const rope_pairs &rq, const rope_pairs &rk, bool with_k, int hd, float eps,
                                            bool norm, float *qdst, float *kdst) {
    __shared__ float part[32][2];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    float sq = rope_ss(rq), sk = with_k ? rope_ss(rk) : 0.0f;
    sq = warp_sum(sq), sk = warp_sum(sk);
    if (lane == 0) part[warp][0] = sq, part[warp][1] = sk;
    __syncthreads();
    sq = 0, sk = 0;
    for (int w = 0; w < nw; w++) sq += part[w][0], sk += part[w][1];
    rope_apply(rq, norm ? rsqrtf(sq / hd + eps) : 1.0f, hd, qdst);
    if (with_k) rope_apply(rk, norm ? rsqrtf(sk / hd + eps) : 1.0f, hd, kdst);
    __syncthreads();
}

/* Decode attention. Grid (H, S), ATT_WARPS warps a block; PER >= head_dim / 32 dimensions a lane. The token at
 * position p (device memory) attends keys [lo, p]; split s takes a contiguous share. Before waiting for the q/k/v
 * product, a block loads what does not depend on it: the first group of cache keys and values of each warp, the
 * norm weights and the RoPE angles. Then every block normalizes and rotates its query head; the block whose share
 * holds p also builds the new key and value itself (no block reads the slot being written), and the first query
 * head of each KV group stores them in the cache. Each block writes one partial (m, l, acc); the last block of a
 * head to finish (counted in count[h], reset by it) merges the S partials into out. */
template <int PER, typename KV>
__global__ void __launch_bounds__(32 * ATT_WARPS)
    dec_attention_kernel(const float *qraw, const float *kraw, const float *vraw, const float *q_norm,
                         const float *k_norm, const float *bq, const float *bk, const float *bv, const double *inv_freq,
                         void *kcache_, void *vcache_, float *part,
                         unsigned *count, float *out, int H, int Hkv, int hd, const int32_t *posp, int window, int slots,
                         int ring, float scale, float softcap, float eps) {
    constexpr int KG = KEY_GROUP; /* keys of a warp whose loads are in flight together (8 measured slower) */
    __shared__ float qs[32 * PER], ks[32 * PER], vs[32 * PER];
    __shared__ float sm_ml[ATT_WARPS][2];
    __shared__ float sm_acc[ATT_WARPS][32 * PER];
    __shared__ float sw[DEC_MAX_SPLITS];
    __shared__ bool last;
    const int h = blockIdx.x, split = blockIdx.y, S = gridDim.y, group = H / Hkv, kvh = h / group;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, per = hd / 32;
    KV *kcache = (KV *)kcache_, *vcache = (KV *)vcache_;
    const int32_t p = *posp, lo = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
    const int32_t share = (p - lo + 1 + S - 1) / S, a = lo + split * share, b = min(p + 1, a + share);
    const bool has_new = a <= p && p < b;
    float kk[KG][PER], vv[KG][PER];
    /* the keys and values of group j0 from the cache, key p (not in it yet) as zeros */
    auto load_group = [&](int32_t j0) {
#pragma unroll
        for (int g = 0; g < KG; g++) {
            const int32_t j = j0 + g < b ? j0 + g : j0; /* past the share: key j0 again, masked later */
            const size_t row = ((ring ? (size_t)(j % slots) : (size_t)j) * Hkv + kvh) * hd + lane * per;
#pragma unroll
            for (int i = 0; i < PER; i++) {
                const bool ok = i < per && j != p;
                kk[g][i] = ok ? kv_ld(kcache + row + i) : 0.0f, vv[g][i] = ok ? kv_ld(vcache + row + i) : 0.0f;
            }
        }
    };
    /* key p of group j0, if it holds it, from the block's own ks/vs */
    auto patch_group = [&](int32_t j0) {
#pragma unroll
        for (int g = 0; g < KG; g++)
            if (j0 + g == p && p < b) {
#pragma unroll
                for (int i = 0; i < PER; i++)
                    if (i < per) /* as the cache holds it (rounded when bf16), as later steps read it */
                        kk[g][i] = kv_round(ks[lane * per + i], kcache), vv[g][i] = kv_round(vs[lane * per + i], vcache);
            }
    };
    int32_t j0 = a + warp * KG;
    if (j0 < b) load_group(j0); /* the cache holds no write of this step but slot p */
    rope_pairs rq, rk;
    rope_setup(rq, q_norm, inv_freq, p, hd);
    if (has_new) rope_setup(rk, k_norm, inv_freq, p, hd);
    pdl_wait();
    pdl_launch_next();
    rope_load(rq, qraw + (size_t)h * hd, bq ? bq + (size_t)h * hd : NULL, hd);
    if (has_new) {
        rope_load(rk, kraw + (size_t)kvh * hd, bk ? bk + (size_t)kvh * hd : NULL, hd);
        for (int i = threadIdx.x; i < hd; i += blockDim.x)
            vs[i] = vraw[(size_t)kvh * hd + i] + (bv ? bv[(size_t)kvh * hd + i] : 0.0f);
    }
    rope_finish(rq, rk, has_new, hd, eps, q_norm != NULL, qs, ks);
    if (has_new) {
        if (h % group == 0) {
            const size_t slot = ring ? (size_t)(p % slots) : (size_t)p;
            for (int i = threadIdx.x; i < hd; i += blockDim.x) {
                kv_st(kcache + (slot * Hkv + kvh) * hd + i, ks[i]);
                kv_st(vcache + (slot * Hkv + kvh) * hd + i, vs[i]);
            }
        }
    }
    float qv[PER], acc[PER];
#pragma unroll
    for (int i = 0; i < PER; i++) qv[i] = i < per ? qs[lane * per + i] : 0.0f, acc[i] = 0;
    float m = -INFINITY, l = 0;
    for (bool first = true; j0 < b; j0 += ATT_WARPS * KG, first = false) {
        if (!first) load_group(j0);
        if (has_new) patch_group(j0);
        float sc[KG];
#pragma unroll
        for (int g = 0; g < KG; g++) {
            float d = 0;
#pragma unroll
            for (int i = 0; i < PER; i++) d += qv[i] * kk[g][i];
            sc[g] = d;
        }
        softmax_step(sc, vv, j0, b, scale, softcap, m, l, acc);
    }
    float M, L, wgt[ATT_WARPS];
    merge_warps(m, l, acc, per, sm_ml, sm_acc, M, L, wgt);
    /* partial of split i of head h: acc at part[(h S + i) hd], (m, l) at part[H S hd + 2 (h S + i)] */
    float *pacc = part + (size_t)h * S * hd, *pml = part + (size_t)H * S * hd + (size_t)h * S * 2;
    if (threadIdx.x == 0) pml[2 * split] = M, pml[2 * split + 1] = L;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float v = 0;
        for (int w = 0; w < ATT_WARPS; w++) v += sm_acc[w][d] * wgt[w];
        pacc[(size_t)split * hd + d] = v;
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&count[h], 1u) == (unsigned)S - 1;
    __syncthreads();
    if (!last) return;
    /* the merge, by the head's last block: each thread the (m, l) of one split (S <= blockDim), warp w the
     * accumulators of splits w, w + ATT_WARPS, ... (MERGE_GROUP at a time), the first group's loads issued with
     * the (m, l) ones */
    __threadfence();
    float pv[MERGE_GROUP][PER];
    auto load_merge = [&](int i0) {
#pragma unroll
        for (int g = 0; g < MERGE_GROUP; g++) {
            const int i = i0 + g * ATT_WARPS;
#pragma unroll
            for (int k = 0; k < PER; k++) pv[g][k] = i < S && k < per ? __ldcg(pacc + (size_t)i * hd + lane * per + k) : 0.0f;
        }
    };
    load_merge(warp);
    float mi = -INFINITY, li = 0;
    if ((int)threadIdx.x < S) mi = __ldcg(pml + 2 * threadIdx.x), li = __ldcg(pml + 2 * threadIdx.x + 1);
    const float Mh = block_max(mi);
    const float wi = li == 0 ? 0.0f : expf(mi - Mh); /* an empty share weighs nothing */
    const float Lh = block_sum(li * wi);
    if ((int)threadIdx.x < S) sw[threadIdx.x] = wi;
    __syncthreads();
    float ah[PER];
#pragma unroll
    for (int k = 0; k < PER; k++) ah[k] = 0;
    for (int i0 = warp; i0 < S; i0 += ATT_WARPS * MERGE_GROUP) {
        if (i0 != warp) load_merge(i0);
#pragma unroll
        for (int g = 0; g < MERGE_GROUP; g++) {
            const int i = i0 + g * ATT_WARPS;
            const float w = i < S ? sw[i] : 0.0f;
#pragma unroll
            for (int k = 0; k < PER; k++) ah[k] += w * pv[g][k];
        }
    }
#pragma unroll
    for (int k = 0; k < PER; k++)
        if (k < per) sm_acc[warp][lane * per + k] = ah[k];
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float v = 0;
        for (int w = 0; w < ATT_WARPS; w++) v += sm_acc[w][d];
        out[(size_t)h * hd + d] = v / Lh;
    }
    if (threadIdx.x == 0) count[h] = 0;
}

/* The residual step of a block and the norm that opens the next one: x += RMSNorm(o) * w_post (x += o without
 * w_post: qwen2 has no sandwich norms), then xn = RMSNorm(x) * w_next. One block per row; o over `planes` planes of
 * the rows (a batched step's GEMM output, see to_planes_kernel: summed as it is read). */
__global__ void addnorm_kernel(float *x, const float *o, const float *w_post, const float *w_next, float *xn, int n,
                               float eps, int planes) {
    float *xr = x + (size_t)blockIdx.x * n, *nr = xn + (size_t)blockIdx.x * n;
    const float *orow = o + (size_t)blockIdx.x * n;
    const size_t ps = (size_t)gridDim.x * n;
    float ss = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = plane_sum(orow, i, planes, ps);
        ss += v * v;
    }
    float r = rsqrtf(block_sum(ss) / n + eps);
    ss = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float ov = plane_sum(orow, i, planes, ps);
        float v = xr[i] + (w_post ? ov * r * w_post[i] : ov);
        xr[i] = v;
        ss += v * v;
    }
    r = rsqrtf(block_sum(ss) / n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) nr[i] = xr[i] * r * w_next[i];
}

/* A few logits of a few rows of the final-normed states (packed prompts' last tokens): out[i * n_ids + k] =
 * softcap(E[ids[k]] . xn[rows[i]]), bf16 weights and float states; one warp per (row, id). */
__global__ void select_logits_kernel(const float *xn, int d, const int32_t *rows, int n_rows, const bf16 *E,
                                     const int32_t *ids, int n_ids, float softcap, float *out) {
    const int w = (int)(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32), lane = threadIdx.x % 32;
    if (w >= n_rows * n_ids) return;
    const float *x = xn + (size_t)rows[w / n_ids] * d;
    const bf16 *e = E + (size_t)ids[w % n_ids] * d;
    float s = 0;
    for (int c = lane; c < d; c += 32) s += __bfloat162float(e[c]) * x[c];
    s = warp_sum(s);
    if (lane == 0) out[w] = softcap > 0 ? softcap * tanhf(s / softcap) : s;
}

/* ---- a step's candidates (decoder/top.h) ---------------------------------------------------------------------
 * Rows of n_vocab logits on the GPU become, per row, the CQ_TOP_MAX largest (by argmax_key: larger logit first,
 * then the smaller id, the host's order), the log-sum-exp and the logits of CQ_TOP_MAX_IDS named ids.
 * Pass 1: one block per (row, segment of TOP_SEG logits) bitonic-sorts its segment's keys and keeps the best
 * CQ_TOP_MAX, with the segment's (max, sum of exp). Pass 2: one block per row. Every key of the row's top CQ_TOP_MAX
 * is in its segment's best, and none is below the largest of the segments' CQ_TOP_MAX-th keys (that segment alone has
 * CQ_TOP_MAX keys at or above it): the keys at or above that bound, usually little more than CQ_TOP_MAX, are sorted;
 * should more than TOP_SORT pass it (many equal logits), the segments' keys are merged TOP_CHUNK at a time behind the
 * running best instead. The segments' sums give the log-sum-exp. */
#define TOP_SORT 4096                      /* pass 2's buffer */
#define TOP_SEG_SORT 1024                  /* pass 1's sort: CQ_TOP_MAX empty slots, then the segment */
#define TOP_SEG (TOP_SEG_SORT - CQ_TOP_MAX) /* logits per pass-1 block */
#define TOP_CHUNK (TOP_SORT - CQ_TOP_MAX)
#define TOP_THREADS 512

/* what pass 2 writes per row, copied to the host as is */
typedef struct {
    int32_t ids[CQ_TOP_MAX];
    float logits[CQ_TOP_MAX];
    float lse;
    float id_logits[CQ_TOP_MAX_IDS];
} top_row;

/* sm[0, n) in descending order (n a power of two); block-wide, ends with a barrier */
__device__ void bitonic_desc(unsigned long long *sm, int n) {
    for (int k = 2; k <= n; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = threadIdx.x; i < n; i += blockDim.x) {
                const int o = i ^ j;
                if (o > i) {
                    const unsigned long long a = sm[i], b = sm[o];
                    if ((i & k) == 0 ? a < b : a > b) sm[i] = b, sm[o] = a;
                }
            }
            __syncthreads();
        }
}

__device__ unsigned long long block_max_u64(unsigned long long v) {
    __shared__ unsigned long long part[32];
    __shared__ unsigned long long total;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int o = 16; o > 0; o >>= 1) {
        const unsigned long long w = __shfl_xor_sync(0xffffffffu, v, o);
        v = w > v ? w : v;
    }
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long m = 0;
        for (int w = 0; w < (int)(blockDim.x / 32); w++) m = part[w] > m ? part[w] : m;
        total = m;
    }
    __syncthreads();
    return total;
}

__device__ __forceinline__ float key_value(unsigned long long key) {
    unsigned u = (unsigned)(key >> 32);
    u = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
    return __uint_as_float(u);
}

__global__ void __launch_bounds__(TOP_THREADS)
    top_partial_kernel(const float *logits, int V, unsigned long long *keys, float2 *ml) {
    __shared__ unsigned long long sm[TOP_SEG_SORT];
    const int row = blockIdx.y, seg = blockIdx.x, n_seg = gridDim.x;
    const float *x = logits + (size_t)row * V;
    const int a = seg * TOP_SEG, b = min(V, a + TOP_SEG);
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < TOP_SEG_SORT; i += blockDim.x) {
        const int j = a + i - CQ_TOP_MAX; /* the first CQ_TOP_MAX slots: no key (0 sorts last) */
        unsigned long long k = 0;
        if (i >= CQ_TOP_MAX && j < b) {
            const float v = x[j];
            mx = fmaxf(mx, v);
            k = argmax_key(v, j);
        }
        sm[i] = k;
    }
    mx = block_max(mx); /* its barriers also publish sm */
    float sum = 0;
    for (int j = a + threadIdx.x; j < b; j += blockDim.x) sum += expf(x[j] - mx);
    sum = block_sum(sum);
    bitonic_desc(sm, TOP_SEG_SORT);
    unsigned long long *out = keys + ((size_t)row * n_seg + seg) * CQ_TOP_MAX;
    for (int i = threadIdx.x; i < CQ_TOP_MAX; i += blockDim.x) out[i] = sm[i];
    if (threadIdx.x == 0) ml[(size_t)row * n_seg + seg] = make_float2(mx, sum);
}

__global__ void __launch_bounds__(TOP_THREADS)
    top_merge_kernel(const float *logits, int V, const unsigned long long *keys, const float2 *ml, int n_seg,
                     const int32_t *ids, top_row *out) {
    __shared__ unsigned long long sm[TOP_SORT];
    __shared__ int count;
    const int row = blockIdx.x, n = n_seg * CQ_TOP_MAX;
    const unsigned long long *k = keys + (size_t)row * n;
    unsigned long long bound = 0;
    for (int i = threadIdx.x; i < n_seg; i += blockDim.x) {
        const unsigned long long v = k[(size_t)i * CQ_TOP_MAX + CQ_TOP_MAX - 1];
        bound = v > bound ? v : bound;
    }
    if (threadIdx.x == 0) count = 0;
    bound = block_max_u64(bound); /* its barriers also publish count */
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const unsigned long long v = k[i];
        if (v && v >= bound) {
            const int c = atomicAdd(&count, 1);
            if (c < TOP_SORT) sm[c] = v;
        }
    }
    __syncthreads();
    const int c = count;
    if (c <= TOP_SORT) {
        int n2 = CQ_TOP_MAX;
        while (n2 < c) n2 <<= 1;
        for (int i = c + threadIdx.x; i < n2; i += blockDim.x) sm[i] = 0;
        __syncthreads();
        bitonic_desc(sm, n2);
    } else {
        __syncthreads();
        for (int i = threadIdx.x; i < CQ_TOP_MAX; i += blockDim.x) sm[i] = 0;
        for (int c0 = 0; c0 < n; c0 += TOP_CHUNK) {
            for (int i = threadIdx.x; i < TOP_CHUNK; i += blockDim.x) sm[CQ_TOP_MAX + i] = c0 + i < n ? k[c0 + i] : 0;
            __syncthreads();
            bitonic_desc(sm, TOP_SORT);
        }
    }
    float m = -INFINITY;
    for (int i = threadIdx.x; i < n_seg; i += blockDim.x) m = fmaxf(m, ml[(size_t)row * n_seg + i].x);
    m = block_max(m);
    float sum = 0;
    for (int i = threadIdx.x; i < n_seg; i += blockDim.x) {
        const float2 p = ml[(size_t)row * n_seg + i];
        sum += p.y == 0 ? 0.0f : p.y * expf(p.x - m);
    }
    sum = block_sum(sum);
    top_row *o = out + row;
    for (int i = threadIdx.x; i < CQ_TOP_MAX; i += blockDim.x) {
        o->ids[i] = (int32_t)(0xffffffffu - (unsigned)(sm[i] & 0xffffffffu));
        o->logits[i] = key_value(sm[i]);
    }
    if (threadIdx.x < CQ_TOP_MAX_IDS) o->id_logits[threadIdx.x] = logits[(size_t)row * V + ids[row * CQ_TOP_MAX_IDS + threadIdx.x]];
    if (threadIdx.x == 0) o->lse = m + logf(sum);
}

/* pass-1 blocks per row of n_vocab logits */
static int top_segments(int32_t n_vocab) { return (int)((n_vocab + TOP_SEG - 1) / TOP_SEG); }

/* ---- model and sequence -------------------------------------------------------------------------------------- */

/* The decode kernels come in IT = 1..8 (16-byte loads per lane a row in flight before the prologue): the one for a
 * row of `cols` bf16 weights. */
#define DEC_MAX_IT 8
static int dec_iters(int cols) {
    int it = (cols + 255) / 256;
    return it < 1 ? 1 : it > DEC_MAX_IT ? DEC_MAX_IT : it;
}
typedef void (*dec_mv_fn)(const bf16 *, int, float *, const bf16 *, int, float *, const bf16 *, int, float *, int, dpro);
typedef void (*dec_geglu_fn)(const bf16 *, const bf16 *, int, int, float *, dpro, int);
typedef void (*dec_logits_fn)(const bf16 *, int, int, dpro, float, float *, unsigned long long *);
#define DEC_PICK(kernel, cols)                                                                                       \
    switch (dec_iters(cols)) {                                                                                       \
    case 1: return kernel<1>;                                                                                        \
    case 2: return kernel<2>;                                                                                        \
    case 3: return kernel<3>;                                                                                        \
    case 4: return kernel<4>;                                                                                        \
    case 5: return kernel<5>;                                                                                        \
    case 6: return kernel<6>;                                                                                        \
    case 7: return kernel<7>;                                                                                        \
    default: return kernel<8>;                                                                                       \
    }
static dec_mv_fn dec_mv_for(int cols) { DEC_PICK(dec_mv_kernel, cols) }
static dec_geglu_fn dec_geglu_for(int cols) { DEC_PICK(dec_geglu_kernel, cols) }
static dec_logits_fn dec_logits_for(int cols) { DEC_PICK(dec_logits_kernel, cols) }
#define Q8_MAX_IT 10
/* The instance of a Q8_0 kernel template for cols / 128 iterations (1 .. Q8_MAX_IT), or NULL. */
#define Q8_PICK(kernel, cols)                                                                                        \
    if ((cols) % 128) return NULL;                                                                                   \
    switch ((cols) / 128) {                                                                                          \
    case 1: return kernel<1>;                                                                                        \
    case 2: return kernel<2>;                                                                                        \
    case 3: return kernel<3>;                                                                                        \
    case 4: return kernel<4>;                                                                                        \
    case 5: return kernel<5>;                                                                                        \
    case 6: return kernel<6>;                                                                                        \
    case 7: return kernel<7>;                                                                                        \
    case 8: return kernel<8>;                                                                                        \
    case 9: return kernel<9>;                                                                                        \
    case 10: return kernel<10>;                                                                                      \
    default: return NULL;                                                                                            \
    }
typedef void (*dec_logits_q8_fn)(const int8_t *, const __half *, int, int, dpro, float, float *, unsigned long long *);
static dec_logits_q8_fn dec_logits_q8_for(int cols) { Q8_PICK(dec_logits_q8_kernel, cols) }
typedef void (*rows_logits_q8_fn)(const int8_t *, const __half *, int, int, const float *, int, float, float *);
static rows_logits_q8_fn rows_logits_q8_for(int cols) { Q8_PICK(rows_logits_q8_kernel, cols) }
/* Dynamic shared memory of the Q8_0 logits kernel: the prologue's 5 cols floats, then the swizzled copy of xs. */
static size_t q8_logits_smem(int cols) { return (size_t)6 * cols * sizeof(float); }
typedef void (*dec_attention_fn)(const float *, const float *, const float *, const float *, const float *,
                                 const float *, const float *, const float *, const double *, void *, void *, float *,
                                 unsigned *, float *, int, int, int, const int32_t *, int, int, int, float, float, float);
/* the decode attention kernel for head_dim (a multiple of 64 up to 32 * MAX_HD_PER_LANE) and a float or bf16 cache */
template <typename KV> static dec_attention_fn dec_attention_kv(int hd) {
    return hd <= 64 ? dec_attention_kernel<2, KV> : hd <= 128 ? dec_attention_kernel<4, KV>
                                                : hd <= 256 ? dec_attention_kernel<8, KV> : dec_attention_kernel<16, KV>;
}
static dec_attention_fn dec_attention_for(int hd, bool kv16) {
    return kv16 ? dec_attention_kv<bf16>(hd) : dec_attention_kv<float>(hd);
}
typedef void (*qk_store_fn)(float *, const float *, const float *, const float *, const float *, const float *,
                            const float *, const float *, const double *, void *, void *, int, int, int,
                            const int32_t *, const int32_t *, int, int, float, batch_rows);
static qk_store_fn qk_store_for(bool kv16) {
    return kv16 ? qk_norm_rope_store_kernel<bf16> : qk_norm_rope_store_kernel<float>;
}
typedef void (*att_partial_fn)(const float *, const void *, const void *, float *, int, int, int, const int32_t *,
                               packed_keys, int, int, int, float, float, batch_rows);
static att_partial_fn att_partial_for(bool kv16) {
    return kv16 ? attention_partial_kernel<bf16> : attention_partial_kernel<float>;
}

typedef struct {
    bf16 *w;
    int64_t rows, cols;
} dmat;

typedef struct {
    dmat wq, wk, wv, wo, wgate, wup, wdown;
    float *attn_norm, *q_norm, *k_norm, *post_attn_norm, *ffn_norm, *post_ffw_norm; /* NULL: none (qwen2) */
    float *bq, *bk, *bv; /* projection biases (qwen2), or NULL */
} dlayer;

struct cq_cuda_model {
    const cq_gemma *m;
    cudaStream_t stream;
    cublasHandle_t blas;
    dlayer *layers;
    bf16 *token_embd; /* (n_vocab, n_embd): the embedding */
    bf16 *output;     /* (n_vocab, n_embd): the output matrix, token_embd when tied */
    float *output_norm;
    double *inv_freq[2]; /* local, global */
    size_t max_cols;
    void *blas_workspace; /* given to cuBLAS, so that it allocates nothing while a graph is captured */
    bool pdl;             /* launch decode kernels with programmatic dependent launch (sm_90, CQ_CUDA_PDL != 0) */
    int logit_blocks;     /* the logits kernel's grid: as many blocks as are resident at once */
    int8_t *emb_q;        /* a Q8_0 output matrix as in the file, for a decode step's logits (NULL: bf16 is used) */
    __half *emb_d;
    bool *merged;         /* (n_layer, CQ_N_PROJ): the weight holds an adapter's delta (cq_cuda_model_set_lora) */
    struct dec_batch *batch; /* batched decode steps' buffers and graphs (cq_cuda_decode_batch), made at first use */
    struct dec_batch *rows;  /* rows of several sequences (cq_cuda_forward_rows), made at first use */
    bool kv16;               /* sequences made from now on keep K and V in bf16 (cq_cuda_model_set_kv_bf16) */
    bool rows_logits;        /* batched steps' logits as batch 1 computes them (rows_logits), not the bf16 GEMM:
                              * CLAUSEQA_BATCH_LOGITS=rows, off by default until measured on a GPU (issue 31) */
    bool dec_bf16_act;       /* a decode step's products take their input vectors rounded to bf16, the rounding of
                              * the batched step's GEMMs (CLAUSEQA_DECODE_BF16_ACT=1: an experiment of issue 31,
                              * off by default; the logits keep the float state) */
    int batch_planes;        /* the batched kernels' products (cq_cuda_decode_batch, cq_cuda_forward_rows) take their
                              * float inputs as this many bf16 planes (to_planes_kernel): 3 = exactly, batch 1's
                              * rounding points; 1 = rounded to bf16 (CLAUSEQA_BATCH_PLANES=1|2|3; 1 by default
                              * until a GPU has run the planes, issue 31) */
    float *kv_scratch;       /* bf16 caches: the float K and V the prefill attention's SGEMMs read, */
    int32_t kv_scratch_keys; /* for up to this many key slots (0: the online-softmax kernels instead) */
};

static void batch_free(struct dec_batch *b);

struct cq_cuda_seq {
    cq_cuda_model *cm;
    int32_t max_tokens;
    void **k, **v;          /* per layer: the cache, float or bf16 (kv16) */
    bool kv16;
    int32_t *slots;
    int32_t *tokens, *pos;  /* device: the chunk's tokens, its first position */
    int32_t *h_step;        /* pinned host: token and position of a step (read by the graphs' copies) */
    int32_t *h_tokens;      /* pinned host: the tokens of a full prefill chunk */
    float *h_logits;        /* pinned host: a decode step's logits */
    unsigned long long *top_keys; /* a step's candidates (cq_cuda_eval_top): pass 1's keys and sums, */
    float2 *top_ml;
    int32_t *top_ids, *h_top_ids; /* the named ids (device, pinned host: CQ_TOP_MAX_IDS), */
    top_row *top, *h_top;         /* the result (device, pinned host) */
    unsigned long long *best, *h_best; /* device and pinned host: a greedy step's packed argmax */
    float *x2;              /* the other residual buffer of a decode step */
    unsigned *count;        /* per query head: attention blocks done (decode) */
    int dec_splits[2];      /* decode attention splits: local, global layers */
    float *x, *xn, *q, *kn, *vn, *att, *o, *g, *u, *part, *logits;
    float *sc;                /* prefill attention scores, sc_floats of them */
    size_t sc_floats;
    bf16 *xb;
    size_t part_floats;
    cudaGraphExec_t decode_graph[3]; /* one decode step (logits out; argmax out; candidates out), captured at first use */
    cudaGraphExec_t prefill_graph[PREFILL_GRAPHS]; /* full chunks of CQ_CUDA_BATCH tokens, per first position */
    int32_t prefill_pos[PREFILL_GRAPHS];
    bool prefill_seen[PREFILL_GRAPHS]; /* a full chunk ran directly at prefill_pos (its graph may follow) */
    int prefill_next;              /* the slot to reuse next */
    bool no_graphs;                /* a capture failed: launch kernels directly (slower, same results) */
    /* packed prompts (cq_cuda_score_packed): every layer's cache flat (one slot per packed token, no ring) */
    bool flat;
    bool packed;                   /* the chunk being queued is packed: */
    int32_t *rope_pos, *seq_start; /* device (CQ_CUDA_BATCH): each token's position in its prompt, and where (as a
                                    * packed index) its prompt starts */
    int32_t *pre_start, *pre_len;  /* device (CQ_CUDA_BATCH): each token's shared prefix (packed_keys), 0 long: none */
    int32_t key0;                  /* no key before it is needed (the chunk's first prompt, or a prefix it reads) */
    int32_t *sel_rows, *sel_ids;   /* device: rows of the chunk whose logits are wanted, the token ids wanted */
    float *sel_out;                /* device: (prompts, ids) the selected logits */
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

/* A Q8_0 matrix whose rows suit dec_logits_q8_kernel, repacked on the host into int8 weights and fp16 scales and
 * uploaded; any other leaves *q and *d NULL. */
static cq_status upload_q8(const cq_wmat *w, int8_t **q, __half **d, cq_err *err) {
    *q = NULL, *d = NULL;
    if (w->type != CQ_QTYPE_Q8_0 || !dec_logits_q8_for((int)w->cols)) return CQ_OK;
    const size_t rows = (size_t)w->rows, cols = (size_t)w->cols, nb = cols / 32;
    int8_t *hq = (int8_t *)malloc(rows * cols);
    uint16_t *hd = (uint16_t *)malloc(rows * nb * sizeof(uint16_t));
    if (!hq || !hd) {
        free(hq), free(hd);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory staging the Q8_0 embedding");
    }
    for (size_t r = 0; r < rows; r++) { /* a block: fp16 scale, then 32 int8 */
        const uint8_t *src = (const uint8_t *)w->data + r * w->row_bytes;
        for (size_t b = 0; b < nb; b++, src += 34) {
            memcpy(hd + r * nb + b, src, 2);
            memcpy(hq + r * cols + b * 32, src + 2, 32);
        }
    }
    cudaError_t e = cudaMalloc(q, rows * cols);
    if (e == cudaSuccess) e = cudaMalloc(d, rows * nb * sizeof(__half));
    if (e == cudaSuccess) e = cudaMemcpy(*q, hq, rows * cols, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemcpy(*d, hd, rows * nb * sizeof(__half), cudaMemcpyHostToDevice);
    free(hq), free(hd);
    if (e != cudaSuccess) return cq_err_set(err, CQ_ERR_DEVICE, "uploading the Q8_0 embedding: %s", cudaGetErrorString(e));
    return CQ_OK;
}

/* h NULL (a norm or bias the model does not have): *out NULL */
static cq_status upload_floats(const float *h, size_t n, float **out, cq_err *err) {
    *out = NULL;
    if (!h) return CQ_OK;
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
    cm->token_embd = cm->output = emb.w;
    if (m->output.data != m->token_embd.data) { /* untied (qwen2's output.weight) */
        if ((s = upload_matrix(&m->output, &emb, err))) return s;
        cm->output = emb.w;
    }
    if ((s = upload_q8(&m->output, &cm->emb_q, &cm->emb_d, err))) return s;
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
            (s = upload_floats(L->post_ffw_norm, d, &D->post_ffw_norm, err)) ||
            (s = upload_floats(L->bq, (size_t)m->n_head * hd, &D->bq, err)) ||
            (s = upload_floats(L->bk, (size_t)m->n_head_kv * hd, &D->bk, err)) ||
            (s = upload_floats(L->bv, (size_t)m->n_head_kv * hd, &D->bv, err)))
            return s;
    }
    double *freq = (double *)malloc(hd / 2 * sizeof(double));
    if (!freq) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (int kind = 0; kind < 2; kind++) {
        rope_freqs(freq, m->head_dim, 1e4f, 1.0f); /* a kind without layers (qwen2 has no local ones): never read */
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
                             (const void *)to_planes_kernel,
                             (const void *)softcap_kernel,       (const void *)qk_store_for(false),
                             (const void *)qk_store_for(true),   (const void *)att_partial_for(false),
                             (const void *)att_partial_for(true), (const void *)attention_combine_kernel,
                             (const void *)addnorm_kernel,       (const void *)dec_attention_for(m->head_dim, false),
                             (const void *)dec_attention_for(m->head_dim, true), (const void *)bf16_to_f32_kernel,
                             (const void *)att_softmax_kernel,   (const void *)select_logits_kernel};
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        cudaFuncAttributes fa;
        CUDA_TRY(cudaFuncGetAttributes(&fa, kernels[i]));
    }
    cm->max_cols = d;
    if ((size_t)m->n_ff > cm->max_cols) cm->max_cols = (size_t)m->n_ff;
    if ((size_t)m->n_head * hd > cm->max_cols) cm->max_cols = (size_t)m->n_head * hd;
    /* the decode products' kernels, with room for their input vector and the prologue's staging in dynamic shared
     * memory; the logits kernel's persistent grid fills every multiprocessor */
    const int smem = (int)((cm->max_cols + 4 * d) * sizeof(float));
    const int widths[] = {(int)d, (int)(m->n_head * hd), (int)m->n_ff};
    for (int i = 0; i < 3; i++) {
        const void *dk[] = {(const void *)dec_mv_for(widths[i]), (const void *)dec_geglu_for(widths[i]),
                            (const void *)dec_logits_for(widths[i])};
        for (int j = 0; j < 3; j++) {
            cudaFuncAttributes fa;
            CUDA_TRY(cudaFuncGetAttributes(&fa, dk[j]));
            if (smem > 48 * 1024) CUDA_TRY(cudaFuncSetAttribute(dk[j], cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        }
    }
    const char *bl = getenv("CLAUSEQA_BATCH_LOGITS");
    cm->rows_logits = bl && !strcmp(bl, "rows");
    const char *ba = getenv("CLAUSEQA_DECODE_BF16_ACT");
    cm->dec_bf16_act = ba && *ba && strcmp(ba, "0");
    const char *bp = getenv("CLAUSEQA_BATCH_PLANES");
    cm->batch_planes = 1;
    if (bp && *bp) {
        if (strcmp(bp, "1") && strcmp(bp, "2") && strcmp(bp, "3"))
            return cq_err_set(err, CQ_ERR_INVALID, "CLAUSEQA_BATCH_PLANES=%s: 1, 2 or 3", bp);
        cm->batch_planes = bp[0] - '0';
    }
    if (cm->rows_logits) { /* the batched steps' logits kernel (rows_logits), loaded now as the others */
        const void *rk = cm->emb_q ? (const void *)rows_logits_q8_for((int)d) : (const void *)rows_logits_bf16_kernel;
        cudaFuncAttributes fa;
        CUDA_TRY(cudaFuncGetAttributes(&fa, rk));
        if (rows_logits_smem((int)d) > 48 * 1024)
            CUDA_TRY(cudaFuncSetAttribute(rk, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)rows_logits_smem((int)d)));
    }
    int dev = 0, major = 0, sms = 0, per_sm = 0;
    CUDA_TRY(cudaGetDevice(&dev));
    CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const void *lk = cm->emb_q ? (const void *)dec_logits_q8_for((int)d) : (const void *)dec_logits_for((int)d);
    CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, lk, 32 * LOGIT_WARPS,
                                                          cm->emb_q ? q8_logits_smem((int)d) : 5 * d * sizeof(float)));
    cm->logit_blocks = sms * (per_sm > 0 ? per_sm : 1);
    const char *pdl = getenv("CQ_CUDA_PDL");
    cm->pdl = major >= 9 && !(pdl && !strcmp(pdl, "0"));
    const char *kv = getenv("CLAUSEQA_KV_BF16");
    return cq_cuda_model_set_kv_bf16(cm, kv && *kv && strcmp(kv, "0"), err);
}

extern "C" cq_status cq_cuda_model_set_kv_bf16(cq_cuda_model *cm, bool on, cq_err *err) {
    if (on && !cm->kv_scratch) { /* the prefill SGEMMs' float K and V: ATT_GEMM_MAX_KEYS slots of each */
        const size_t kvd = (size_t)cm->m->n_head_kv * cm->m->head_dim;
        CUDA_TRY(cudaMalloc(&cm->kv_scratch, 2 * (size_t)ATT_GEMM_MAX_KEYS * kvd * sizeof(float)));
        cm->kv_scratch_keys = ATT_GEMM_MAX_KEYS;
    }
    if (on != cm->kv16) { /* the batched steps' graphs were captured with the other kernels */
        batch_free(cm->batch);
        batch_free(cm->rows);
        cm->batch = cm->rows = NULL;
    }
    cm->kv16 = on;
    return CQ_OK;
}

static dmat *layer_proj(dlayer *D, cq_proj p) {
    dmat *const m[CQ_N_PROJ] = {&D->wq, &D->wk, &D->wv, &D->wo, &D->wgate, &D->wup, &D->wdown};
    return m[p];
}

/* Scratch of a merge: the weight in float and the factors, on the device. */
typedef struct {
    float *w, *a, *b;
} merge_bufs;

/* out (bf16, already allocated: w's shape) = W + scale B A, with W dequantized on the host in float (exact) and
 * the product added on the GPU in float (cuBLAS SGEMM, beta 1), rounded to bf16 once; a NULL: W alone. a (rank,
 * cols) and b (rows, rank) row-major; bufs large enough. Row-major M (rows x cols) is column-major M^T, so the
 * update is W^T += scale A^T B^T: an m = cols, n = rows, k = rank GEMM of the factors as stored. */
static cq_status merge_upload(cq_cuda_model *cm, const cq_wmat *w, const float *a, const float *b, int rank,
                              float scale, const merge_bufs *bufs, bf16 *out, cq_err *err) {
    const size_t rows = (size_t)w->rows, cols = (size_t)w->cols, n = rows * cols;
    float *host = (float *)malloc(n * sizeof(float));
    if (!host) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory staging weights");
    for (size_t r = 0; r < rows; r++)
        cq_dequant_row(w->type, (const uint8_t *)w->data + r * w->row_bytes, host + r * cols, cols);
    cudaError_t e = cudaMemcpyAsync(bufs->w, host, n * sizeof(float), cudaMemcpyHostToDevice, cm->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cm->stream); /* host is freed below */
    free(host);
    if (e != cudaSuccess) return cq_err_set(err, CQ_ERR_DEVICE, "uploading a weight: %s", cudaGetErrorString(e));
    if (a) {
        const float one = 1.0f;
        CUDA_TRY(cudaMemcpyAsync(bufs->a, a, (size_t)rank * cols * sizeof(float), cudaMemcpyHostToDevice, cm->stream));
        CUDA_TRY(cudaMemcpyAsync(bufs->b, b, rows * (size_t)rank * sizeof(float), cudaMemcpyHostToDevice, cm->stream));
        CUBLAS_TRY(cublasSgemm(cm->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)cols, (int)rows, rank, &scale, bufs->a,
                               (int)cols, bufs->b, rank, &one, bufs->w, (int)cols));
    }
    to_bf16_kernel<<<(unsigned)((n + 255) / 256), 256, 0, cm->stream>>>(bufs->w, out, n);
    LAUNCH_TRY();
    CUDA_TRY(cudaStreamSynchronize(cm->stream)); /* the factors' host memory may go once this returns */
    return CQ_OK;
}

static cq_status merge_bufs_alloc(const cq_gemma *m, int rank, merge_bufs *bufs, cq_err *err) {
    size_t most = 0, side = 0; /* the largest weight, and its largest side */
    for (int32_t l = 0; l < m->n_layer; l++)
        for (int p = 0; p < CQ_N_PROJ; p++) {
            const cq_wmat *w = cq_proj_weight(&m->layers[l], (cq_proj)p);
            most = (size_t)w->rows * w->cols > most ? (size_t)w->rows * w->cols : most;
            const size_t longer = (size_t)(w->rows > w->cols ? w->rows : w->cols);
            side = longer > side ? longer : side;
        }
    CUDA_TRY(cudaMalloc(&bufs->w, most * sizeof(float)));
    CUDA_TRY(cudaMalloc(&bufs->a, (size_t)(rank > 0 ? rank : 1) * side * sizeof(float)));
    CUDA_TRY(cudaMalloc(&bufs->b, (size_t)(rank > 0 ? rank : 1) * side * sizeof(float)));
    return CQ_OK;
}

/* Merging is done once, at load: the decode kernels keep reading one bf16 matrix per projection, so the adapter
 * costs no time per token (docs/PERF.md). Weights merged before and not adapted now are restored from the file;
 * the device buffers stay where they are, so captured graphs remain valid. */
extern "C" cq_status cq_cuda_model_set_lora(cq_cuda_model *cm, const cq_lora *lora, cq_err *err) {
    const cq_gemma *m = cm->m;
    if (!cm->merged && !(cm->merged = (bool *)calloc((size_t)m->n_layer * CQ_N_PROJ, sizeof(bool))))
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    merge_bufs bufs = {NULL, NULL, NULL};
    cq_status st = merge_bufs_alloc(m, lora ? lora->info.rank : 0, &bufs, err);
    for (int32_t l = 0; !st && l < m->n_layer; l++)
        for (int p = 0; !st && p < CQ_N_PROJ; p++) {
            const float *a = lora ? lora->layers[l].a[p] : NULL, *b = lora ? lora->layers[l].b[p] : NULL;
            bool *merged = &cm->merged[(size_t)l * CQ_N_PROJ + p];
            if (!a && !*merged) continue;
            st = merge_upload(cm, cq_proj_weight(&m->layers[l], (cq_proj)p), a, b, lora ? lora->info.rank : 0,
                              lora ? lora->scale : 0.0f, &bufs, layer_proj(&cm->layers[l], (cq_proj)p)->w, err);
            if (!st) *merged = a != NULL;
        }
    cudaFree(bufs.w), cudaFree(bufs.a), cudaFree(bufs.b);
    return st;
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
            cudaFree(D->bq), cudaFree(D->bk), cudaFree(D->bv);
        }
    }
    free(cm->layers);
    free(cm->merged);
    if (cm->output != cm->token_embd) cudaFree(cm->output);
    cudaFree(cm->token_embd);
    cudaFree(cm->emb_q), cudaFree(cm->emb_d);
    cudaFree(cm->output_norm);
    cudaFree(cm->inv_freq[0]);
    cudaFree(cm->inv_freq[1]);
    batch_free(cm->batch);
    batch_free(cm->rows);
    cudaFree(cm->kv_scratch);
    if (cm->blas) cublasDestroy(cm->blas);
    cudaFree(cm->blas_workspace);
    if (cm->stream) cudaStreamDestroy(cm->stream);
    free(cm);
}

static int dec_splits_for(int32_t keys) {
    int s = (int)((keys + DEC_SPLIT_KEYS - 1) / DEC_SPLIT_KEYS);
    return s < 1 ? 1 : s > DEC_MAX_SPLITS ? DEC_MAX_SPLITS : s;
}

/* Attention partial buffers: enough for a full batch with one split, or one token split over its whole range. */
static size_t part_floats_for(const cq_gemma *m, int32_t max_tokens) {
    size_t a = (size_t)CQ_CUDA_BATCH * m->n_head * (m->head_dim + 2);
    size_t b = (size_t)m->n_head * DEC_MAX_SPLITS * (m->head_dim + 2); /* a decode step */
    return a > b ? a : b;
}

/* flat: every layer's cache one slot per position (packed prompts), else local layers keep a ring. */
static cq_status seq_new(cq_cuda_model *cm, int32_t max_tokens, bool flat, cq_cuda_seq **out, cq_err *err) {
    *out = NULL;
    const cq_gemma *m = cm->m;
    cq_cuda_seq *s = (cq_cuda_seq *)calloc(1, sizeof *s);
    if (!s) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    s->cm = cm;
    s->max_tokens = max_tokens;
    s->flat = flat;
    *out = s; /* freed by cq_cuda_seq_free on any error below */
    s->kv16 = cm->kv16;
    s->k = (void **)calloc((size_t)m->n_layer, sizeof *s->k);
    s->v = (void **)calloc((size_t)m->n_layer, sizeof *s->v);
    s->slots = (int32_t *)calloc((size_t)m->n_layer, sizeof *s->slots);
    if (!s->k || !s->v || !s->slots) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    const size_t kvd = (size_t)m->n_head_kv * m->head_dim, f = sizeof(float), B = CQ_CUDA_BATCH;
    const int32_t ring = m->window + CQ_CUDA_BATCH < max_tokens ? m->window + CQ_CUDA_BATCH : max_tokens;
    for (int32_t l = 0; l < m->n_layer; l++) {
        s->slots[l] = m->layers[l].global || flat ? max_tokens : ring;
        const size_t ek = s->kv16 ? sizeof(bf16) : sizeof(float);
        CUDA_TRY(cudaMalloc(&s->k[l], (size_t)s->slots[l] * kvd * ek));
        CUDA_TRY(cudaMalloc(&s->v[l], (size_t)s->slots[l] * kvd * ek));
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
    CUDA_TRY(cudaMalloc(&s->best, sizeof *s->best));
    CUDA_TRY(cudaMalloc(&s->top_keys, (size_t)top_segments(m->n_vocab) * CQ_TOP_MAX * sizeof *s->top_keys));
    CUDA_TRY(cudaMalloc(&s->top_ml, (size_t)top_segments(m->n_vocab) * sizeof *s->top_ml));
    CUDA_TRY(cudaMalloc(&s->top_ids, CQ_TOP_MAX_IDS * sizeof(int32_t)));
    CUDA_TRY(cudaMallocHost(&s->h_top_ids, CQ_TOP_MAX_IDS * sizeof(int32_t)));
    CUDA_TRY(cudaMalloc(&s->top, sizeof *s->top));
    CUDA_TRY(cudaMallocHost(&s->h_top, sizeof *s->h_top));
    s->sc_floats = (size_t)m->n_head * B * (max_tokens < ATT_GEMM_MAX_KEYS ? max_tokens : ATT_GEMM_MAX_KEYS);
    CUDA_TRY(cudaMalloc(&s->sc, s->sc_floats * f));
    CUDA_TRY(cudaMallocHost(&s->h_best, sizeof *s->h_best));
    CUDA_TRY(cudaMalloc(&s->x2, d * f));
    CUDA_TRY(cudaMalloc(&s->count, (size_t)m->n_head * sizeof *s->count));
    CUDA_TRY(cudaMemset(s->count, 0, (size_t)m->n_head * sizeof *s->count));
    for (int kind = 0; kind < 2; kind++) { /* the longest key range a layer of that kind can meet */
        int32_t keys = kind == 0 && m->window < max_tokens ? m->window : max_tokens;
        s->dec_splits[kind] = dec_splits_for(keys);
    }
    if (flat) {
        CUDA_TRY(cudaMalloc(&s->rope_pos, B * sizeof(int32_t)));
        CUDA_TRY(cudaMalloc(&s->seq_start, B * sizeof(int32_t)));
        CUDA_TRY(cudaMalloc(&s->pre_start, B * sizeof(int32_t)));
        CUDA_TRY(cudaMalloc(&s->pre_len, B * sizeof(int32_t)));
        CUDA_TRY(cudaMalloc(&s->sel_rows, B * sizeof(int32_t)));
        CUDA_TRY(cudaMalloc(&s->sel_ids, CQ_CUDA_SCORE_MAX_IDS * sizeof(int32_t)));
        CUDA_TRY(cudaMalloc(&s->sel_out, (size_t)max_tokens * CQ_CUDA_SCORE_MAX_IDS * f));
    }
    return CQ_OK;
}

extern "C" cq_status cq_cuda_seq_new(cq_cuda_model *cm, int32_t max_tokens, cq_cuda_seq **out, cq_err *err) {
    return seq_new(cm, max_tokens, false, out, err);
}

extern "C" cq_status cq_cuda_seq_new_packed(cq_cuda_model *cm, int32_t max_tokens, cq_cuda_seq **out, cq_err *err) {
    return seq_new(cm, max_tokens, true, out, err);
}

extern "C" void cq_cuda_seq_free(cq_cuda_seq *s) {
    if (!s) return;
    for (int32_t l = 0; s->k && l < s->cm->m->n_layer; l++) cudaFree(s->k[l]), cudaFree(s->v[l]);
    free(s->k), free(s->v), free(s->slots);
    cudaFree(s->tokens), cudaFree(s->x), cudaFree(s->xn), cudaFree(s->o), cudaFree(s->q), cudaFree(s->att);
    cudaFree(s->kn), cudaFree(s->vn), cudaFree(s->g), cudaFree(s->u), cudaFree(s->part), cudaFree(s->xb);
    cudaFree(s->logits), cudaFree(s->pos), cudaFree(s->best), cudaFree(s->sc), cudaFree(s->x2), cudaFree(s->count);
    cudaFreeHost(s->h_step), cudaFreeHost(s->h_logits), cudaFreeHost(s->h_tokens), cudaFreeHost(s->h_best);
    cudaFree(s->top_keys), cudaFree(s->top_ml), cudaFree(s->top_ids), cudaFree(s->top);
    cudaFreeHost(s->h_top_ids), cudaFreeHost(s->h_top);
    cudaFree(s->rope_pos), cudaFree(s->seq_start), cudaFree(s->sel_rows), cudaFree(s->sel_ids), cudaFree(s->sel_out);
    cudaFree(s->pre_start), cudaFree(s->pre_len);
    for (int i = 0; i < 3; i++)
        if (s->decode_graph[i]) cudaGraphExecDestroy(s->decode_graph[i]);
    for (int i = 0; i < PREFILL_GRAPHS; i++)
        if (s->prefill_graph[i]) cudaGraphExecDestroy(s->prefill_graph[i]);
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

/* x (n floats) as `planes` bf16 planes in y (planes x n), see to_planes_kernel */
static cq_status to_planes(cq_cuda_model *cm, const float *x, bf16 *y, size_t n, int planes, cq_err *err) {
    to_planes_kernel<<<blocks_for(n, 256), 256, 0, cm->stream>>>(x, y, n, planes);
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

/* Prefill attention as two strided-batched SGEMMs around att_softmax_kernel (exact float32). Keys: the nk slots
 * key0..key0+nk-1 (key0 0 on a ring, and every slot of a ring once it has wrapped). Query head h of KV group
 * g = h / (H / Hkv); one batched GEMM per KV group, the group's heads its batch. sc holds H x T x nk floats. */
static cq_status attention_gemm(cq_cuda_model *cm, const float *q, const float *kc, const float *vc, float *sc,
                                float *out, int T, int H, int Hkv, int hd, const int32_t *pos0p,
                                packed_keys pk, int32_t key0, int32_t nk, int window, int slots, int ring,
                                float scale, float softcap, cq_err *err) {
    const float one = 1.0f, zero = 0.0f;
    const int group = H / Hkv;
    const long long tk = (long long)T * nk; /* kc and vc: the cache from slot key0 on */
    for (int g = 0; g < Hkv; g++) /* S^T (nk x T, column-major) = K^T-view (nk x hd) Q^T-view (hd x T), per head */
        CUBLAS_TRY(cublasSgemmStridedBatched(cm->blas, CUBLAS_OP_T, CUBLAS_OP_N, nk, T, hd, &one, kc + (size_t)g * hd,
                                             Hkv * hd, 0, q + (size_t)g * group * hd, H * hd, hd, &zero,
                                             sc + (size_t)g * group * tk, nk, tk, group));
    att_softmax_kernel<<<H * T, 256, 0, cm->stream>>>(sc, T, nk, pos0p, pk, key0, window, slots, ring, scale,
                                                      softcap);
    LAUNCH_TRY();
    for (int g = 0; g < Hkv; g++) /* O^T (hd x T, ld H*hd) = V^T-view (hd x nk) P^T-view (nk x T), per head */
        CUBLAS_TRY(cublasSgemmStridedBatched(cm->blas, CUBLAS_OP_N, CUBLAS_OP_N, hd, T, nk, &one, vc + (size_t)g * hd,
                                             Hkv * hd, 0, sc + (size_t)g * group * tk, nk, tk, &zero,
                                             out + (size_t)g * group * hd, H * hd, hd, group));
    return CQ_OK;
}

/* The online-softmax attention kernels, each (token, head) split over `splits` shares of its key range. */
static const batch_rows NO_ROWS = {NULL, NULL, NULL, NULL, 1};
static cq_status attention_online(cq_cuda_model *cm, const float *q, const void *kc, const void *vc, bool kv16,
                                  float *part, float *out, int T, int H, int Hkv, int hd, const int32_t *pos0p,
                                  packed_keys pk, int window, int slots, int ring, float scale, float softcap,
                                  int splits, batch_rows br, cq_err *err) {
    att_partial_for(kv16)<<<dim3((unsigned)(T * H), (unsigned)splits), 32 * ATT_WARPS, 0, cm->stream>>>(
        q, kc, vc, part, H, Hkv, hd, pos0p, pk, window, slots, ring, scale, softcap, br);
    LAUNCH_TRY();
    attention_combine_kernel<<<T * H, hd, 0, cm->stream>>>(part, out, hd, splits);
    LAUNCH_TRY();
    return CQ_OK;
}

/* Attention of a chunk of T queries at positions pos0.. (pos0 on the host too, for the GEMM shapes): through
 * attention_gemm when the key slots fit sc (sc_floats), else the online-softmax kernels (also for T = 1). Packed
 * prompts (pk.own set, no ring) need no key before key0: the chunk's first prompt's start, or the earliest shared
 * prefix a token of the chunk reads. */
static cq_status attention(cq_cuda_model *cm, const float *q, const void *kc, const void *vc, bool kv16, float *part,
                           size_t part_floats, float *sc, size_t sc_floats, float *out, int T, int H, int Hkv, int hd,
                           const int32_t *pos0p, int32_t pos0, packed_keys pk, int32_t key0,
                           int32_t max_keys, int window, int slots, int ring, float scale, float softcap, cq_err *err) {
    if (ring) key0 = 0;
    const int32_t nk = ring && pos0 + T > slots ? slots : pos0 + T - key0;
    const size_t kvd = (size_t)Hkv * hd;
    /* a bf16 cache goes through the SGEMMs as float: the slots [key0, key0 + nk) converted into the model's scratch
     * (the values the online kernels read too); without room there, the online kernels read it directly */
    if (T > 1 && sc && (size_t)H * T * nk <= sc_floats && (!kv16 || nk <= cm->kv_scratch_keys)) {
        const float *kf = (const float *)kc + key0 * kvd, *vf = (const float *)vc + key0 * kvd;
        if (kv16) {
            const size_t n = (size_t)nk * kvd;
            float *ks = cm->kv_scratch, *vs = cm->kv_scratch + (size_t)cm->kv_scratch_keys * kvd;
            bf16_to_f32_kernel<<<blocks_for(n, 256), 256, 0, cm->stream>>>((const bf16 *)kc + key0 * kvd, ks, n);
            LAUNCH_TRY();
            bf16_to_f32_kernel<<<blocks_for(n, 256), 256, 0, cm->stream>>>((const bf16 *)vc + key0 * kvd, vs, n);
            LAUNCH_TRY();
            kf = ks, vf = vs;
        }
        return attention_gemm(cm, q, kf, vf, sc, out, T, H, Hkv, hd, pos0p, pk, key0, nk, window, slots, ring,
                              scale, softcap, err);
    }
    int splits = pick_splits(T, H, max_keys);
    while (splits > 1 && (size_t)T * H * splits * (hd + 2) > part_floats) splits /= 2;
    return attention_online(cm, q, kc, vc, kv16, part, out, T, H, Hkv, hd, pos0p, pk, window, slots, ring,
                            scale, softcap, splits, NO_ROWS, err);
}

/* A kernel on the model's stream; with pdl, allowed to start before the previous one ends (it waits inside). */
template <typename... KArgs, typename... Args>
static cudaError_t launch(bool pdl, cudaStream_t st, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                          Args... args) {
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at, cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, ((KArgs)args)...);
}

/* Dynamic shared memory of a decode product over `cols` columns with prologue pro. */
static size_t pro_smem(int cols, const dpro &pro) {
    return ((size_t)cols + (pro.mode == PRO_COPY ? 0 : 4 * (size_t)pro.n)) * sizeof(float);
}

static dpro pro_copy(const float *x, int n) {
    dpro p;
    memset(&p, 0, sizeof p);
    p.mode = PRO_COPY, p.n = n, p.xin = x;
    return p;
}

static dpro pro_addnorm(const cq_gemma *m, const float *x, const float *o, const float *w_post, const float *w_next,
                        float *xout) {
    dpro p;
    memset(&p, 0, sizeof p);
    p.mode = PRO_ADDNORM, p.n = m->n_embd, p.eps = m->rms_eps;
    p.xin = x, p.o = o, p.w_post = w_post, p.w_next = w_next, p.xout = xout;
    return p;
}

/* Up to three matrices with the same columns, stacked by rows, times the prologue's vector (one token). */
static cq_status dec_mv(cq_cuda_model *cm, bool pdl, const dmat *a, float *ya, const dmat *b, float *yb, const dmat *c,
                        float *yc, const dpro &pro, cq_err *err) {
    const int rows = (int)(a->rows + (b ? b->rows : 0) + (c ? c->rows : 0)), cols = (int)a->cols;
    CUDA_TRY(launch(pdl, cm->stream, dec_mv_for(cols), dim3((rows + DEC_WARPS - 1) / DEC_WARPS), dim3(32 * DEC_WARPS),
                    pro_smem(cols, pro), a->w, (int)a->rows, ya, b ? b->w : NULL, b ? (int)b->rows : 0, yb,
                    c ? c->w : NULL, c ? (int)c->rows : 0, yc, cols, pro));
    return CQ_OK;
}

/* Logits of one token (the tied embedding: Q8_0 as in the file when it is, else bf16) with the soft-cap, to logits
 * and/or their argmax to best. */
static cq_status dec_logits(cq_cuda_model *cm, bool pdl, const dpro &pro, float *logits, unsigned long long *best,
                            cq_err *err) {
    const cq_gemma *m = cm->m;
    if (cm->emb_q) {
        const int per_block = LOGIT_WARPS * 4, need = (m->n_vocab + per_block - 1) / per_block;
        CUDA_TRY(launch(pdl, cm->stream, dec_logits_q8_for(m->n_embd),
                        dim3(need < cm->logit_blocks ? need : cm->logit_blocks), dim3(32 * LOGIT_WARPS),
                        q8_logits_smem(m->n_embd), (const int8_t *)cm->emb_q, (const __half *)cm->emb_d,
                        (int)m->n_vocab, (int)m->n_embd, pro, m->final_softcap, logits, best));
        return CQ_OK;
    }
    const int per_block = LOGIT_WARPS * LOGIT_GROUP, need = (m->n_vocab + per_block - 1) / per_block;
    CUDA_TRY(launch(pdl, cm->stream, dec_logits_for(m->n_embd), dim3(need < cm->logit_blocks ? need : cm->logit_blocks),
                    dim3(32 * LOGIT_WARPS), pro_smem(m->n_embd, pro), (const bf16 *)cm->output,
                    (int)m->n_vocab, (int)m->n_embd, pro, m->final_softcap, logits, best));
    return CQ_OK;
}

/* The logits of n final-normed rows x (n, n_embd) to logits (n, n_vocab) as a decode step computes one row's
 * (rows_logits_q8_kernel / rows_logits_bf16_kernel), soft-capped as the model says. */
static cq_status rows_logits(cq_cuda_model *cm, const float *x, int n, float *logits, cq_err *err) {
    const cq_gemma *m = cm->m;
    const int per_block = LOGIT_WARPS * (cm->emb_q ? 4 : 1), need = (m->n_vocab + per_block - 1) / per_block;
    const int blocks = need < cm->logit_blocks ? need : cm->logit_blocks;
    const dim3 grid((unsigned)(blocks > 0 ? blocks : 1), (unsigned)((n + ROWS_X - 1) / ROWS_X));
    const size_t smem = rows_logits_smem(m->n_embd);
    if (cm->emb_q)
        rows_logits_q8_for(m->n_embd)<<<grid, 32 * LOGIT_WARPS, smem, cm->stream>>>(
            cm->emb_q, cm->emb_d, (int)m->n_vocab, (int)m->n_embd, x, n, m->final_softcap, logits);
    else
        rows_logits_bf16_kernel<<<grid, 32 * LOGIT_WARPS, smem, cm->stream>>>(cm->output, (int)m->n_vocab,
                                                                              (int)m->n_embd, x, n, m->final_softcap,
                                                                              logits);
    LAUNCH_TRY();
    return CQ_OK;
}

/* y (T, W.rows) = x W^T: cuBLAS for a batch, the decode product for one token (x in float, no conversion). */
static cq_status linear(cq_cuda_seq *s, const dmat *w, const float *x, int T, float *y, cq_err *err) {
    if (T == 1) return dec_mv(s->cm, false, w, y, NULL, NULL, NULL, NULL, pro_copy(x, (int)w->cols), err);
    cq_status st = to_bf16(s->cm, x, s->xb, (size_t)T * w->cols, err);
    return st ? st : gemm(s->cm, w, s->xb, T, y, err);
}

static cq_status addnorm(cq_cuda_model *cm, float *x, const float *o, const float *w_post, const float *w_next,
                         float *xn, int T, int planes, cq_err *err) {
    addnorm_kernel<<<T, 256, 0, cm->stream>>>(x, o, w_post, w_next, xn, cm->m->n_embd, cm->m->rms_eps, planes);
    LAUNCH_TRY();
    return CQ_OK;
}

/* The kernels of a chunk of T > 1 tokens, queued on the stream: tokens in s->tokens and the first position in
 * s->pos already (for packed prompts also their positions in s->rope_pos and starts in s->seq_start, see
 * cq_cuda_score_packed). The final-normed states end in s->xn (copy_logits takes them from there). */
static cq_status enqueue_chunk(cq_cuda_seq *s, int T, int32_t pos0, cq_err *err) {
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
        if ((st = to_bf16(cm, s->xn, s->xb, (size_t)T * d, err)) || (st = gemm(cm, &D->wq, s->xb, T, s->q, err)) ||
            (st = gemm(cm, &D->wk, s->xb, T, s->kn, err)) || (st = gemm(cm, &D->wv, s->xb, T, s->vn, err)))
            return st;
        const int ring = !L->global && !s->flat;
        qk_store_for(s->kv16)<<<T * (H + Hkv), hd / 2, 0, cm->stream>>>(
            s->q, s->kn, s->vn, D->q_norm, D->k_norm, D->bq, D->bk, D->bv, cm->inv_freq[L->global], s->k[l], s->v[l],
            H, Hkv, hd, s->pos,
            s->packed ? s->rope_pos : NULL, s->slots[l], ring, m->rms_eps, NO_ROWS);
        LAUNCH_TRY();
        const int window = L->global ? 0 : m->window;
        int32_t max_keys = pos0 + T; /* the longest key range of this chunk */
        if (window > 0 && max_keys > window) max_keys = window;
        const float *w_next = l + 1 < m->n_layer ? cm->layers[l + 1].attn_norm : cm->output_norm;
        if ((st = attention(cm, s->q, s->k[l], s->v[l], s->kv16, s->part, s->part_floats, s->sc, s->sc_floats, s->att, T, H,
                            Hkv, hd, s->pos, pos0, s->packed ? packed_keys{s->seq_start, s->pre_start, s->pre_len} : NOT_PACKED,
                            s->packed ? s->key0 : 0, max_keys,
                            window, s->slots[l], ring, m->attn_scale, m->attn_softcap, err)) ||
            (st = linear(s, &D->wo, s->att, T, s->o, err)) ||
            (st = addnorm(cm, s->x, s->o, D->post_attn_norm, D->ffn_norm, s->xn, T, 1, err)))
            return st;
        if ((st = to_bf16(cm, s->xn, s->xb, (size_t)T * d, err)) || (st = gemm(cm, &D->wgate, s->xb, T, s->g, err)) ||
            (st = gemm(cm, &D->wup, s->xb, T, s->u, err)))
            return st;
        geglu_kernel<<<blocks_for((size_t)T * ff, 256), 256, 0, cm->stream>>>(s->g, s->u, (size_t)T * ff, m->ffn_silu,
                                                                             1);
        LAUNCH_TRY();
        /* the last layer's closing norm is the output norm: xn is then ready for the logits */
        if ((st = linear(s, &D->wdown, s->g, T, s->o, err)) ||
            (st = addnorm(cm, s->x, s->o, D->post_ffw_norm, w_next, s->xn, T, 1, err)))
            return st;
    }
    return CQ_OK;
}

/* Logits of rows [first, T) of a finished chunk (final-normed in s->xn) into host memory, LOGIT_ROWS at a time. */
static cq_status copy_logits(cq_cuda_seq *s, int first, int T, float *logits, cq_err *err) {
    cq_cuda_model *cm = s->cm;
    const cq_gemma *m = cm->m;
    const dmat out_w = {cm->output, m->n_vocab, m->n_embd};
    for (int r = first; r < T; r += LOGIT_ROWS) {
        int n = T - r < LOGIT_ROWS ? T - r : LOGIT_ROWS;
        const size_t nv = (size_t)n * m->n_vocab;
        cq_status st = n == 1 ? dec_logits(cm, false, pro_copy(s->xn + (size_t)r * m->n_embd, m->n_embd), s->logits,
                                           NULL, err)
                              : linear(s, &out_w, s->xn + (size_t)r * m->n_embd, n, s->logits, err);
        if (st) return st;
        if (n > 1 && m->final_softcap > 0) {
            softcap_kernel<<<blocks_for(nv, 256), 256, 0, cm->stream>>>(s->logits, nv, m->final_softcap, 1);
            LAUNCH_TRY();
        }
        CUDA_TRY(cudaMemcpyAsync(logits + (size_t)(r - first) * m->n_vocab, s->logits, nv * sizeof(float),
                                 cudaMemcpyDeviceToHost, cm->stream));
    }
    return CQ_OK;
}

/* The kernels of one decode step (token in s->tokens, position in s->pos): the logits to s->logits when
 * with_logits, else only their argmax to s->best. */
static cq_status enqueue_decode(cq_cuda_seq *s, bool with_logits, cq_err *err) {
    cq_cuda_model *cm = s->cm;
    const cq_gemma *m = cm->m;
    const int d = m->n_embd, hd = m->head_dim, H = m->n_head, Hkv = m->n_head_kv;
    const bool pdl = cm->pdl;
    float *cur = s->x, *nxt = s->x2; /* the residual stream, ping-ponged by the prologues that update it */
    cq_status st;
    for (int32_t l = 0; l < m->n_layer; l++) {
        const cq_gemma_layer *L = &m->layers[l];
        const dlayer *D = &cm->layers[l];
        dpro pro;
        if (l == 0) {
            memset(&pro, 0, sizeof pro);
            pro.mode = PRO_EMBED, pro.n = d, pro.eps = m->rms_eps, pro.emb_scale = m->embed_scale;
            pro.token = s->tokens, pro.emb = cm->token_embd, pro.w_next = D->attn_norm, pro.xout = cur;
            pro.best = s->best;
        } else {
            pro = pro_addnorm(m, cur, s->o, cm->layers[l - 1].post_ffw_norm, D->attn_norm, nxt);
            float *t = cur;
            cur = nxt, nxt = t;
        }
        const int act16 = cm->dec_bf16_act; /* the products' inputs only (not the logits') */
        pro.bf16_act = act16;
        if ((st = dec_mv(cm, pdl && l > 0, &D->wq, s->q, &D->wk, s->kn, &D->wv, s->vn, pro, err))) return st;
        const int splits = s->dec_splits[L->global];
        CUDA_TRY(launch(pdl, cm->stream, dec_attention_for(hd, s->kv16), dim3(H, splits), dim3(32 * ATT_WARPS), 0,
                        (const float *)s->q, (const float *)s->kn, (const float *)s->vn, (const float *)D->q_norm,
                        (const float *)D->k_norm, (const float *)D->bq, (const float *)D->bk, (const float *)D->bv,
                        (const double *)cm->inv_freq[L->global], s->k[l], s->v[l], s->part,
                        s->count, s->att, H, Hkv, hd, (const int32_t *)s->pos, L->global ? 0 : m->window,
                        s->slots[l], L->global ? 0 : 1, m->attn_scale, m->attn_softcap, m->rms_eps));
        dpro pa = pro_copy(s->att, H * hd);
        pa.bf16_act = act16;
        if ((st = dec_mv(cm, pdl, &D->wo, s->o, NULL, NULL, NULL, NULL, pa, err))) return st;
        pro = pro_addnorm(m, cur, s->o, D->post_attn_norm, D->ffn_norm, nxt);
        pro.bf16_act = act16;
        float *t = cur;
        cur = nxt, nxt = t;
        CUDA_TRY(launch(pdl, cm->stream, dec_geglu_for(d), dim3((m->n_ff + DEC_WARPS - 1) / DEC_WARPS),
                        dim3(32 * DEC_WARPS), pro_smem(d, pro), (const bf16 *)D->wgate.w,
                        (const bf16 *)D->wup.w, (int)m->n_ff, d, s->g, pro, (int)m->ffn_silu));
        dpro pg = pro_copy(s->g, m->n_ff);
        pg.bf16_act = act16;
        if ((st = dec_mv(cm, pdl, &D->wdown, s->o, NULL, NULL, NULL, NULL, pg, err))) return st;
    }
    const dpro pro = pro_addnorm(m, cur, s->o, cm->layers[m->n_layer - 1].post_ffw_norm, cm->output_norm, NULL);
    return dec_logits(cm, pdl, pro, with_logits ? s->logits : NULL, s->best, err);
}

/* The candidates of `rows` rows of logits (each n_vocab floats) into out: the two passes of top_partial_kernel and
 * top_merge_kernel; keys and ml hold pass 1's results (top_segments per row), ids CQ_TOP_MAX_IDS per row. */
static cq_status enqueue_top(cq_cuda_model *cm, const float *logits, int rows, unsigned long long *keys, float2 *ml,
                             const int32_t *ids, top_row *out, cq_err *err) {
    const int V = cm->m->n_vocab, n_seg = top_segments(V);
    top_partial_kernel<<<dim3((unsigned)n_seg, (unsigned)rows), TOP_THREADS, 0, cm->stream>>>(logits, V, keys, ml);
    LAUNCH_TRY();
    top_merge_kernel<<<rows, TOP_THREADS, 0, cm->stream>>>(logits, V, keys, ml, n_seg, ids, out);
    LAUNCH_TRY();
    return CQ_OK;
}

/* The copies and kernels of one decode step (token and position from s->h_step), the result to pinned host
 * memory: the logits (variant 0), the argmax (variant 1) or the candidates (variant 2, ids from s->h_top_ids). */
static cq_status enqueue_step(cq_cuda_seq *s, int variant, cq_err *err) {
    cq_cuda_model *cm = s->cm;
    CUDA_TRY(cudaMemcpyAsync(s->tokens, s->h_step, sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream));
    CUDA_TRY(cudaMemcpyAsync(s->pos, s->h_step + 1, sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream));
    if (variant == 2)
        CUDA_TRY(cudaMemcpyAsync(s->top_ids, s->h_top_ids, CQ_TOP_MAX_IDS * sizeof(int32_t), cudaMemcpyHostToDevice,
                                 cm->stream));
    cq_status st = enqueue_decode(s, variant != 1, err);
    if (st) return st;
    if (variant == 0)
        CUDA_TRY(cudaMemcpyAsync(s->h_logits, s->logits, (size_t)cm->m->n_vocab * sizeof(float),
                                 cudaMemcpyDeviceToHost, cm->stream));
    else if (variant == 1)
        CUDA_TRY(cudaMemcpyAsync(s->h_best, s->best, sizeof *s->best, cudaMemcpyDeviceToHost, cm->stream));
    else {
        if ((st = enqueue_top(cm, s->logits, 1, s->top_keys, s->top_ml, s->top_ids, s->top, err))) return st;
        CUDA_TRY(cudaMemcpyAsync(s->h_top, s->top, sizeof *s->top, cudaMemcpyDeviceToHost, cm->stream));
    }
    return CQ_OK;
}

/* A decode step, replayed from a CUDA graph of its ~90 kernels (captured at its first use, per variant), which
 * saves the launch overhead that dominates a 270M model at batch 1. */
static cq_status decode_step(cq_cuda_seq *s, int32_t token, int32_t pos, int variant, cq_err *err) {
    cq_cuda_model *cm = s->cm;
    s->h_step[0] = token;
    s->h_step[1] = pos;
    if (!s->no_graphs && !s->decode_graph[variant]) {
        cudaGraph_t g;
        CUDA_TRY(cudaStreamBeginCapture(cm->stream, cudaStreamCaptureModeThreadLocal));
        cq_status st = enqueue_step(s, variant, err);
        cudaError_t e = cudaStreamEndCapture(cm->stream, &g);
        const bool captured = e == cudaSuccess;
        if (!st && captured) e = cudaGraphInstantiate(&s->decode_graph[variant], g, 0);
        if (captured) cudaGraphDestroy(g);
        if (st || e != cudaSuccess) {
            CQ_WARN("decoder: CUDA graph capture failed (%s); decoding without graphs",
                    st ? (err ? err->msg : "") : cudaGetErrorString(e));
            cudaGetLastError(); /* clear the capture error */
            cq_err_clear(err);
            s->decode_graph[variant] = NULL;
            s->no_graphs = true;
        }
    }
    if (s->no_graphs) { /* capture failed once on this device: the same kernels, launched one by one */
        cq_status st = enqueue_step(s, variant, err);
        if (st) return st;
    } else {
        CUDA_TRY(cudaGraphLaunch(s->decode_graph[variant], cm->stream));
    }
    CUDA_TRY(cudaStreamSynchronize(cm->stream));
    return CQ_OK;
}

static int32_t unpack_argmax(unsigned long long key) { return (int32_t)(0xffffffffu - (unsigned)(key & 0xffffffffu)); }

/* A full prefill chunk as a CUDA graph: ~300 launches and cuBLAS calls become one. The attention GEMMs' shapes
 * depend on the chunk's first position, so a graph is captured per position, the second time a full chunk starts
 * there (a sequence reset and fed again: a fresh sequence runs each chunk once and gains nothing from capturing);
 * PREFILL_GRAPHS positions are remembered, the oldest forgotten. */
static cq_status prefill_graph_launch(cq_cuda_seq *s, int slot, cq_err *err) {
    cq_cuda_model *cm = s->cm;
    const int32_t pos0 = s->h_step[1];
    if (!s->prefill_graph[slot]) {
        cudaGraph_t g;
        CUDA_TRY(cudaStreamBeginCapture(cm->stream, cudaStreamCaptureModeThreadLocal));
        cudaMemcpyAsync(s->tokens, s->h_tokens, CQ_CUDA_BATCH * sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream);
        cudaMemcpyAsync(s->pos, s->h_step + 1, sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream);
        cq_status st = enqueue_chunk(s, CQ_CUDA_BATCH, pos0, err);
        cudaError_t e = cudaStreamEndCapture(cm->stream, &g);
        const bool captured = e == cudaSuccess;
        if (!st && captured) e = cudaGraphInstantiate(&s->prefill_graph[slot], g, 0);
        if (captured) cudaGraphDestroy(g);
        if (st || e != cudaSuccess) {
            CQ_WARN("decoder: CUDA graph capture failed (%s); running without graphs",
                    st ? (err ? err->msg : "") : cudaGetErrorString(e));
            cudaGetLastError();
            cq_err_clear(err);
            s->prefill_graph[slot] = NULL;
            s->no_graphs = true;
            CUDA_TRY(cudaMemcpyAsync(s->tokens, s->h_tokens, CQ_CUDA_BATCH * sizeof(int32_t), cudaMemcpyHostToDevice,
                                     cm->stream));
            CUDA_TRY(cudaMemcpyAsync(s->pos, s->h_step + 1, sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream));
            return enqueue_chunk(s, CQ_CUDA_BATCH, pos0, err);
        }
    }
    CUDA_TRY(cudaGraphLaunch(s->prefill_graph[slot], cm->stream));
    return CQ_OK;
}

static cq_status forward_chunk(cq_cuda_seq *s, const int32_t *tokens, int T, int32_t pos0, float *logits,
                               bool all_logits, cq_err *err) {
    cq_cuda_model *cm = s->cm;
    if (T == 1) {
        cq_status st = decode_step(s, tokens[0], pos0, 0, err);
        if (!st && logits) memcpy(logits, s->h_logits, (size_t)cm->m->n_vocab * sizeof(float));
        return st;
    }
    s->h_step[1] = pos0;
    int slot = -1;
    for (int i = 0; i < PREFILL_GRAPHS; i++)
        if (s->prefill_seen[i] && s->prefill_pos[i] == pos0) slot = i;
    cq_status st;
    if (T == CQ_CUDA_BATCH && slot >= 0 && !s->no_graphs) {
        memcpy(s->h_tokens, tokens, (size_t)T * sizeof(int32_t));
        st = prefill_graph_launch(s, slot, err);
    } else {
        CUDA_TRY(cudaMemcpyAsync(s->tokens, tokens, (size_t)T * sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream));
        CUDA_TRY(cudaMemcpyAsync(s->pos, s->h_step + 1, sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream));
        st = enqueue_chunk(s, T, pos0, err);
        if (T == CQ_CUDA_BATCH && slot < 0) { /* remember the position, forgetting the oldest */
            slot = s->prefill_next;
            s->prefill_next = (s->prefill_next + 1) % PREFILL_GRAPHS;
            if (s->prefill_graph[slot]) cudaGraphExecDestroy(s->prefill_graph[slot]);
            s->prefill_graph[slot] = NULL;
            s->prefill_seen[slot] = true;
            s->prefill_pos[slot] = pos0;
        }
    }
    if (!st && logits) st = copy_logits(s, all_logits ? 0 : T - 1, T, logits, err);
    if (st) return st;
    CUDA_TRY(cudaStreamSynchronize(cm->stream));
    return CQ_OK;
}

extern "C" cq_status cq_cuda_decode_greedy(cq_cuda_seq *s, int32_t token, int32_t pos, int32_t *next, cq_err *err) {
    cq_status st = decode_step(s, token, pos, 1, err);
    if (!st) *next = unpack_argmax(*s->h_best);
    return st;
}

extern "C" size_t cq_cuda_seq_kv_bytes(const cq_cuda_seq *s) {
    const cq_gemma *m = s->cm->m;
    size_t n = 0;
    const size_t ek = s->kv16 ? sizeof(bf16) : sizeof(float);
    for (int32_t l = 0; l < m->n_layer; l++) n += 2 * (size_t)s->slots[l] * m->n_head_kv * m->head_dim * ek;
    return n;
}

extern "C" cq_status cq_cuda_copy_bandwidth(size_t bytes, double *gb_per_s, cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    cudaError_t e = cudaMalloc(&a, bytes);
    if (e == cudaSuccess) e = cudaMalloc(&b, bytes);
    if (e == cudaSuccess) e = cudaMemset(a, 1, bytes);
    if (e == cudaSuccess) e = cudaEventCreate(&e0);
    if (e == cudaSuccess) e = cudaEventCreate(&e1);
    const int reps = 20;
    if (e == cudaSuccess) e = cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice); /* warm-up */
    if (e == cudaSuccess) e = cudaEventRecord(e0);
    for (int i = 0; i < reps && e == cudaSuccess; i++)
        e = cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, bytes, cudaMemcpyDeviceToDevice);
    if (e == cudaSuccess) e = cudaEventRecord(e1);
    if (e == cudaSuccess) e = cudaEventSynchronize(e1);
    float ms = 0;
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, e0, e1);
    cudaFree(a), cudaFree(b);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (e != cudaSuccess) return cq_err_set(err, CQ_ERR_DEVICE, "copy bandwidth: %s", cudaGetErrorString(e));
    *gb_per_s = 2.0 * bytes * reps / (ms * 1e-3) / 1e9; /* bytes read plus bytes written */
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

/* A row of candidates as the request wants it. */
static void top_to_host(const top_row *r, int32_t n_vocab, const cq_top_request *req, cq_top *out) {
    const int k = req->k < 1 ? 1 : req->k > CQ_TOP_MAX ? CQ_TOP_MAX : req->k;
    out->n = k < n_vocab ? k : n_vocab;
    memcpy(out->top_ids, r->ids, (size_t)out->n * sizeof(int32_t));
    memcpy(out->top_logits, r->logits, (size_t)out->n * sizeof(float));
    out->lse = r->lse;
    for (int j = 0; j < req->n_ids && j < CQ_TOP_MAX_IDS; j++) out->id_logits[j] = r->id_logits[j];
}

static void request_ids(const cq_top_request *req, int32_t *ids) {
    for (int j = 0; j < CQ_TOP_MAX_IDS; j++) ids[j] = j < req->n_ids ? req->ids[j] : 0;
}

extern "C" cq_status cq_cuda_eval_top(cq_cuda_seq *s, const int32_t *tokens, size_t n, int32_t pos,
                                      const cq_top_request *req, cq_top *out, cq_err *err) {
    cq_cuda_model *cm = s->cm;
    if (n == 0) return cq_err_set(err, CQ_ERR_INVALID, "candidates of no token");
    request_ids(req, s->h_top_ids);
    cq_status st;
    /* a last chunk of one token runs as a decode step, which leaves no final-normed state in s->xn: the step itself
     * then gives the candidates */
    if (n % CQ_CUDA_BATCH == 1) {
        if (n > 1 && (st = cq_cuda_eval(s, tokens, n - 1, pos, NULL, false, err))) return st;
        if ((st = decode_step(s, tokens[n - 1], pos + (int32_t)n - 1, 2, err))) return st;
        top_to_host(s->h_top, cm->m->n_vocab, req, out);
        return CQ_OK;
    }
    if ((st = cq_cuda_eval(s, tokens, n, pos, NULL, false, err))) return st;
    /* the chunk's last row, final-normed in s->xn: its logits on the GPU, then its candidates */
    const int last = (int)((n - 1) % CQ_CUDA_BATCH);
    const cq_gemma *m = cm->m;
    if ((st = dec_logits(cm, false, pro_copy(s->xn + (size_t)last * m->n_embd, m->n_embd), s->logits, NULL, err)))
        return st;
    CUDA_TRY(cudaMemcpyAsync(s->top_ids, s->h_top_ids, CQ_TOP_MAX_IDS * sizeof(int32_t), cudaMemcpyHostToDevice,
                             cm->stream));
    if ((st = enqueue_top(cm, s->logits, 1, s->top_keys, s->top_ml, s->top_ids, s->top, err))) return st;
    CUDA_TRY(cudaMemcpyAsync(s->h_top, s->top, sizeof *s->top, cudaMemcpyDeviceToHost, cm->stream));
    CUDA_TRY(cudaStreamSynchronize(cm->stream));
    top_to_host(s->h_top, m->n_vocab, req, out);
    return CQ_OK;
}

/* ---- batched decode steps (cq_cuda_decode_batch) ----------------------------------------------------------------
 * B tokens of B sequences: every product one cuBLAS GEMM of B rows (as a prefill chunk), QK-norm + RoPE + KV store
 * and attention one launch each with every row's position and cache from arrays (batch_rows), logits a GEMM of B
 * rows, the candidates of each row. A graph per B, captured at its first use; the step's inputs (tokens,
 * positions, named ids, each layer's cache pointers and slots per row) go up in one copy from pinned memory. */
typedef struct dec_batch {
    int cap, out_cap; /* rows a forward, rows whose candidates it gives (cq_cuda_forward_rows; both
                       * CQ_CUDA_DECODE_BATCH_MAX for decode steps) */
    int planes;       /* the products' inputs as planes bf16 planes (cm->batch_planes): xb, and the GEMM outputs q,
                       * kn, vn, o, g, u, hold planes x cap rows */
    int logit_planes; /* the same for the logits GEMM's final-normed states (planes; 1 with the rows kernel, which
                       * takes them in float): logits holds logit_planes x out_cap rows */
    float *x, *xn, *q, *kn, *vn, *att, *o, *g, *u, *logits, *part;
    bf16 *xb;
    unsigned long long *keys;
    float2 *ml;
    top_row *out, *h_out;
    /* the step's inputs, `in` on the device and h_in pinned, in this layout (L = n_layer): float *k[L][cap],
     * *v[L][cap]; int32 tokens[cap], pos[cap], slots[L][cap], ids[out_cap][CQ_TOP_MAX_IDS], sel[out_cap] (the rows
     * whose candidates are wanted) */
    char *in, *h_in;
    size_t in_bytes;
    size_t off_v, off_tokens, off_pos, off_slots, off_ids, off_sel;
    int sms; /* the GPU's multiprocessors, for the attention splits */
    cudaGraphExec_t graph[CQ_CUDA_DECODE_BATCH_MAX + 1];
    bool no_graphs;
} dec_batch;

/* Attention splits for B rows: about two blocks per multiprocessor, at most 32 shares a head. */
static int batch_splits(const dec_batch *b, int B, int H) {
    const int sp = (2 * b->sms + B * H - 1) / (B * H);
    return sp < 1 ? 1 : sp > 32 ? 32 : sp;
}

static void batch_free(dec_batch *b) {
    if (!b) return;
    cudaFree(b->x), cudaFree(b->xn), cudaFree(b->q), cudaFree(b->kn), cudaFree(b->vn), cudaFree(b->att);
    cudaFree(b->o), cudaFree(b->g), cudaFree(b->u), cudaFree(b->logits), cudaFree(b->part), cudaFree(b->xb);
    cudaFree(b->keys), cudaFree(b->ml), cudaFree(b->out), cudaFreeHost(b->h_out);
    cudaFree(b->in), cudaFreeHost(b->h_in);
    for (int i = 0; i <= CQ_CUDA_DECODE_BATCH_MAX; i++)
        if (b->graph[i]) cudaGraphExecDestroy(b->graph[i]);
    free(b);
}

static cq_status batch_new(cq_cuda_model *cm, int cap, int out_cap, dec_batch **out, cq_err *err) {
    const cq_gemma *m = cm->m;
    dec_batch *b = (dec_batch *)calloc(1, sizeof *b);
    if (!b) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    *out = b; /* freed by the caller on error */
    b->cap = cap, b->out_cap = out_cap, b->planes = cm->batch_planes;
    b->logit_planes = cm->rows_logits ? 1 : b->planes;
    const size_t CO = (size_t)out_cap, L = (size_t)m->n_layer, f = sizeof(float);
    const size_t C = (size_t)cap, CP = C * (size_t)b->planes; /* rows of the GEMMs' inputs and outputs */
    const size_t d = (size_t)m->n_embd, qd = (size_t)m->n_head * m->head_dim, ff = (size_t)m->n_ff;
    const size_t kvd = (size_t)m->n_head_kv * m->head_dim, n_seg = (size_t)top_segments(m->n_vocab);
    int dev = 0;
    CUDA_TRY(cudaGetDevice(&dev));
    CUDA_TRY(cudaDeviceGetAttribute(&b->sms, cudaDevAttrMultiProcessorCount, dev));
    int most = 1; /* the partials' buffer: the most (row, split) pairs of any B */
    for (int B = 1; B <= cap; B++) most = B * batch_splits(b, B, m->n_head) > most ? B * batch_splits(b, B, m->n_head) : most;
    CUDA_TRY(cudaMalloc(&b->x, C * d * f));
    CUDA_TRY(cudaMalloc(&b->xn, C * d * f));
    CUDA_TRY(cudaMalloc(&b->o, CP * d * f));
    CUDA_TRY(cudaMalloc(&b->q, CP * qd * f));
    CUDA_TRY(cudaMalloc(&b->att, C * qd * f));
    CUDA_TRY(cudaMalloc(&b->kn, CP * kvd * f));
    CUDA_TRY(cudaMalloc(&b->vn, CP * kvd * f));
    CUDA_TRY(cudaMalloc(&b->g, CP * ff * f));
    CUDA_TRY(cudaMalloc(&b->u, CP * ff * f));
    CUDA_TRY(cudaMalloc(&b->logits, (size_t)b->logit_planes * CO * (size_t)m->n_vocab * f));
    CUDA_TRY(cudaMalloc(&b->part, (size_t)most * m->n_head * (m->head_dim + 2) * f));
    CUDA_TRY(cudaMalloc(&b->xb, CP * cm->max_cols * sizeof(bf16)));
    CUDA_TRY(cudaMalloc(&b->keys, CO * n_seg * CQ_TOP_MAX * sizeof *b->keys));
    CUDA_TRY(cudaMalloc(&b->ml, CO * n_seg * sizeof *b->ml));
    CUDA_TRY(cudaMalloc(&b->out, CO * sizeof *b->out));
    CUDA_TRY(cudaMallocHost(&b->h_out, CO * sizeof *b->h_out));
    b->off_v = L * C * sizeof(float *);
    b->off_tokens = 2 * L * C * sizeof(float *);
    b->off_pos = b->off_tokens + C * sizeof(int32_t);
    b->off_slots = b->off_pos + C * sizeof(int32_t);
    b->off_ids = b->off_slots + L * C * sizeof(int32_t);
    b->off_sel = b->off_ids + CO * CQ_TOP_MAX_IDS * sizeof(int32_t);
    b->in_bytes = b->off_sel + CO * sizeof(int32_t);
    CUDA_TRY(cudaMalloc(&b->in, b->in_bytes));
    CUDA_TRY(cudaMallocHost(&b->h_in, b->in_bytes));
    memset(b->h_in, 0, b->in_bytes);
    return CQ_OK;
}

/* Row i of x (rows[i] of the source) to row i of y: the rows whose candidates a forward of rows gives. */
__global__ void gather_rows_kernel(const float *x, const int32_t *rows, int d, float *y) {
    const float *src = x + (size_t)rows[blockIdx.x] * d;
    float *dst = y + (size_t)blockIdx.x * d;
    for (int i = threadIdx.x; i < d; i += blockDim.x) dst[i] = src[i];
}

/* The logits of B final-normed rows x (B, n_embd) to b->logits (B, n_vocab) by the cuBLAS GEMM on the output
 * matrix's bf16 copy: the states in b->logit_planes bf16 planes (3: exactly, as a decode step's logits kernel takes
 * them; 1: rounded to bf16, which alone put a batched row's log-sum-exp up to 0.21 off batch 1's in the float
 * emulation, the weights' bf16 alone 0.009: issue 31), the planes summed and soft-capped by softcap_kernel. */
static cq_status gemm_logits(cq_cuda_model *cm, dec_batch *b, const float *x, int B, cq_err *err) {
    const cq_gemma *m = cm->m;
    const dmat out_w = {cm->output, m->n_vocab, m->n_embd};
    const int P = b->logit_planes;
    cq_status st;
    if ((st = to_planes(cm, x, b->xb, (size_t)B * m->n_embd, P, err)) ||
        (st = gemm(cm, &out_w, b->xb, P * B, b->logits, err)))
        return st;
    if (m->final_softcap > 0 || P > 1) {
        softcap_kernel<<<blocks_for((size_t)B * m->n_vocab, 256), 256, 0, cm->stream>>>(
            b->logits, (size_t)B * m->n_vocab, m->final_softcap, P);
        LAUNCH_TRY();
    }
    return CQ_OK;
}

/* The kernels of a batched forward of B rows, inputs in b->in already; the candidates of every row (n_out < 0), or
 * of the n_out rows listed at off_sel (none: n_out 0, a forward that only fills caches), end in b->out. */
static cq_status enqueue_batch(cq_cuda_model *cm, dec_batch *b, int B, int n_out, cq_err *err) {
    const cq_gemma *m = cm->m;
    const int d = m->n_embd, hd = m->head_dim, H = m->n_head, Hkv = m->n_head_kv, ff = m->n_ff;
    const size_t C = (size_t)b->cap;
    void *const *kc = (void *const *)b->in, *const *vc = (void *const *)(b->in + b->off_v);
    const int32_t *tokens = (const int32_t *)(b->in + b->off_tokens), *pos = (const int32_t *)(b->in + b->off_pos);
    const int32_t *slots = (const int32_t *)(b->in + b->off_slots), *ids = (const int32_t *)(b->in + b->off_ids);
    const int splits = batch_splits(b, B, H);
    const int P = b->planes, PB = P * B; /* every product: one GEMM over the P planes of the B rows' inputs */
    cq_status st;
    embed_kernel<<<blocks_for((size_t)B * d, 256), 256, 0, cm->stream>>>(tokens, cm->token_embd, b->x, B, d,
                                                                          m->embed_scale);
    LAUNCH_TRY();
    if ((st = rmsnorm(cm, b->x, cm->layers[0].attn_norm, b->xn, B, d, 0, err))) return st;
    for (int32_t l = 0; l < m->n_layer; l++) {
        const cq_gemma_layer *L = &m->layers[l];
        const dlayer *D = &cm->layers[l];
        const batch_rows br = {pos, kc + (size_t)l * C, vc + (size_t)l * C, slots + (size_t)l * C, P};
        if ((st = to_planes(cm, b->xn, b->xb, (size_t)B * d, P, err)) ||
            (st = gemm(cm, &D->wq, b->xb, PB, b->q, err)) || (st = gemm(cm, &D->wk, b->xb, PB, b->kn, err)) ||
            (st = gemm(cm, &D->wv, b->xb, PB, b->vn, err)))
            return st;
        const int ring = !L->global;
        qk_store_for(cm->kv16)<<<B * (H + Hkv), hd / 2, 0, cm->stream>>>(
            b->q, b->kn, b->vn, D->q_norm, D->k_norm, D->bq, D->bk, D->bv, cm->inv_freq[L->global], NULL, NULL, H, Hkv,
            hd, NULL, NULL, 0,
            ring, m->rms_eps, br);
        LAUNCH_TRY();
        const float *w_next = l + 1 < m->n_layer ? cm->layers[l + 1].attn_norm : cm->output_norm;
        if ((st = attention_online(cm, b->q, NULL, NULL, cm->kv16, b->part, b->att, B, H, Hkv, hd, NULL, NOT_PACKED,
                                   L->global ? 0 : m->window, 0, ring, m->attn_scale, m->attn_softcap, splits, br,
                                   err)) ||
            (st = to_planes(cm, b->att, b->xb, (size_t)B * H * hd, P, err)) ||
            (st = gemm(cm, &D->wo, b->xb, PB, b->o, err)) ||
            (st = addnorm(cm, b->x, b->o, D->post_attn_norm, D->ffn_norm, b->xn, B, P, err)) ||
            (st = to_planes(cm, b->xn, b->xb, (size_t)B * d, P, err)) ||
            (st = gemm(cm, &D->wgate, b->xb, PB, b->g, err)) || (st = gemm(cm, &D->wup, b->xb, PB, b->u, err)))
            return st;
        geglu_kernel<<<blocks_for((size_t)B * ff, 256), 256, 0, cm->stream>>>(b->g, b->u, (size_t)B * ff, m->ffn_silu,
                                                                             P);
        LAUNCH_TRY();
        if ((st = to_planes(cm, b->g, b->xb, (size_t)B * ff, P, err)) ||
            (st = gemm(cm, &D->wdown, b->xb, PB, b->o, err)) ||
            (st = addnorm(cm, b->x, b->o, D->post_ffw_norm, w_next, b->xn, B, P, err)))
            return st;
    }
    const float *xf = b->xn; /* the final-normed rows whose logits are wanted */
    if (n_out == 0) return CQ_OK;
    if (n_out > 0) {
        gather_rows_kernel<<<n_out, 256, 0, cm->stream>>>(b->xn, (const int32_t *)(b->in + b->off_sel), d, b->o);
        LAUNCH_TRY();
        xf = b->o, B = n_out;
    }
    if (cm->rows_logits) {
        /* the rows' logits as a batch-1 step computes them (float states, the same weights): the log-sum-exp and
         * the candidates then agree with batch 1's (the bf16 GEMM puts the log-sum-exp up to 1.3 off on a row) */
        if ((st = rows_logits(cm, xf, B, b->logits, err))) return st;
    } else if ((st = gemm_logits(cm, b, xf, B, err))) {
        return st;
    }
    return enqueue_top(cm, b->logits, B, b->keys, b->ml, ids, b->out, err);
}

static cq_status enqueue_batch_step(cq_cuda_model *cm, dec_batch *b, int B, cq_err *err) {
    CUDA_TRY(cudaMemcpyAsync(b->in, b->h_in, b->in_bytes, cudaMemcpyHostToDevice, cm->stream));
    cq_status st = enqueue_batch(cm, b, B, -1, err);
    if (st) return st;
    CUDA_TRY(cudaMemcpyAsync(b->h_out, b->out, (size_t)B * sizeof *b->out, cudaMemcpyDeviceToHost, cm->stream));
    return CQ_OK;
}

extern "C" cq_status cq_cuda_decode_batch(cq_cuda_seq *const *seqs, const int32_t *tokens, const int32_t *pos, int B,
                                          const cq_top_request *req, cq_top *out, cq_err *err) {
    if (B < 1 || B > CQ_CUDA_DECODE_BATCH_MAX)
        return cq_err_set(err, CQ_ERR_INVALID, "a batched decode step of %d sequences (1 to %d)", B,
                          CQ_CUDA_DECODE_BATCH_MAX);
    if (B == 1) return cq_cuda_eval_top(seqs[0], tokens, 1, pos[0], req, out, err);
    cq_cuda_model *cm = seqs[0]->cm;
    const cq_gemma *m = cm->m;
    for (int i = 0; i < B; i++)
        if (seqs[i]->cm != cm || seqs[i]->flat || seqs[i]->kv16 != cm->kv16 || pos[i] < 0 ||
            pos[i] >= seqs[i]->max_tokens)
            return cq_err_set(err, CQ_ERR_INVALID, "batched decode: sequence %d does not fit the batch", i);
    cq_status st;
    if (!cm->batch && (st = batch_new(cm, CQ_CUDA_DECODE_BATCH_MAX, CQ_CUDA_DECODE_BATCH_MAX, &cm->batch, err))) {
        batch_free(cm->batch);
        cm->batch = NULL;
        return st;
    }
    dec_batch *b = cm->batch;
    const size_t C = CQ_CUDA_DECODE_BATCH_MAX;
    void **kc = (void **)b->h_in, **vc = (void **)(b->h_in + b->off_v);
    int32_t *ht = (int32_t *)(b->h_in + b->off_tokens), *hp = (int32_t *)(b->h_in + b->off_pos);
    int32_t *hs = (int32_t *)(b->h_in + b->off_slots), *hi = (int32_t *)(b->h_in + b->off_ids);
    for (int i = 0; i < B; i++) {
        ht[i] = tokens[i], hp[i] = pos[i];
        request_ids(&req[i], hi + (size_t)i * CQ_TOP_MAX_IDS);
        for (int32_t l = 0; l < m->n_layer; l++) {
            kc[(size_t)l * C + i] = seqs[i]->k[l], vc[(size_t)l * C + i] = seqs[i]->v[l];
            hs[(size_t)l * C + i] = seqs[i]->slots[l];
        }
    }
    if (!b->no_graphs && !b->graph[B]) {
        cudaGraph_t g;
        CUDA_TRY(cudaStreamBeginCapture(cm->stream, cudaStreamCaptureModeThreadLocal));
        st = enqueue_batch_step(cm, b, B, err);
        cudaError_t e = cudaStreamEndCapture(cm->stream, &g);
        const bool captured = e == cudaSuccess;
        if (!st && captured) e = cudaGraphInstantiate(&b->graph[B], g, 0);
        if (captured) cudaGraphDestroy(g);
        if (st || e != cudaSuccess) {
            CQ_WARN("decoder: CUDA graph capture of a batched step failed (%s); batching without graphs",
                    st ? (err ? err->msg : "") : cudaGetErrorString(e));
            cudaGetLastError();
            cq_err_clear(err);
            b->graph[B] = NULL;
            b->no_graphs = true;
        }
    }
    if (b->no_graphs) {
        if ((st = enqueue_batch_step(cm, b, B, err))) return st;
    } else {
        CUDA_TRY(cudaGraphLaunch(b->graph[B], cm->stream));
    }
    CUDA_TRY(cudaStreamSynchronize(cm->stream));
    for (int i = 0; i < B; i++) top_to_host(&b->h_out[i], m->n_vocab, &req[i], &out[i]);
    return CQ_OK;
}

/* Rows of several sequences in one forward (cq_cuda_forward_rows): the batched step's kernels over R rows (each
 * row's position and cache from the inputs, as a step's), the candidates of the rows listed only. No graph: the
 * shapes change with every call. A sequence's rows are consecutive positions, and the KV store of every row runs
 * before any attention of the layer, so a row sees the keys of its sequence's earlier rows in the same forward;
 * at most CQ_CUDA_BATCH of them, so a local layer's ring (window + CQ_CUDA_BATCH slots) keeps every key a row
 * needs, as in a prefill chunk. */
extern "C" cq_status cq_cuda_forward_rows(cq_cuda_seq *const *seqs, const int32_t *tokens, const int32_t *pos, int R,
                                          const int32_t *out_rows, int n_out, const cq_top_request *req, cq_top *out,
                                          cq_err *err) {
    if (R < 1 || R > CQ_CUDA_ROWS_MAX || n_out < 0 || n_out > CQ_CUDA_DECODE_BATCH_MAX)
        return cq_err_set(err, CQ_ERR_INVALID, "a forward of %d rows, %d of them with candidates (1 to %d, 0 to %d)", R,
                          n_out, CQ_CUDA_ROWS_MAX, CQ_CUDA_DECODE_BATCH_MAX);
    cq_cuda_model *cm = seqs[0]->cm;
    const cq_gemma *m = cm->m;
    int run_start = 0; /* the first row of the current sequence's run */
    for (int i = 0; i < R; i++) {
        if (seqs[i]->cm != cm || seqs[i]->flat || seqs[i]->kv16 != cm->kv16 || pos[i] < 0 ||
            pos[i] >= seqs[i]->max_tokens)
            return cq_err_set(err, CQ_ERR_INVALID, "forward of rows: row %d does not fit its sequence", i);
        if (i > 0 && seqs[i] == seqs[i - 1]) {
            if (pos[i] != pos[i - 1] + 1)
                return cq_err_set(err, CQ_ERR_INVALID, "forward of rows: row %d is not at the position after row %d",
                                  i, i - 1);
            continue;
        }
        for (int j = 0; j < run_start; j++) /* a sequence in two runs would see keys out of order */
            if (seqs[j] == seqs[i])
                return cq_err_set(err, CQ_ERR_INVALID, "forward of rows: rows %d and %d of one sequence are apart", j, i);
        run_start = i;
    }
    for (int i = 0; i < n_out; i++)
        if (out_rows[i] < 0 || out_rows[i] >= R)
            return cq_err_set(err, CQ_ERR_INVALID, "forward of rows: candidates of row %d of %d", out_rows[i], R);
    cq_status st;
    if (!cm->rows && (st = batch_new(cm, CQ_CUDA_ROWS_MAX, CQ_CUDA_DECODE_BATCH_MAX, &cm->rows, err))) {
        batch_free(cm->rows);
        cm->rows = NULL;
        return st;
    }
    dec_batch *b = cm->rows;
    const size_t C = (size_t)b->cap;
    void **kc = (void **)b->h_in, **vc = (void **)(b->h_in + b->off_v);
    int32_t *ht = (int32_t *)(b->h_in + b->off_tokens), *hp = (int32_t *)(b->h_in + b->off_pos);
    int32_t *hs = (int32_t *)(b->h_in + b->off_slots), *hi = (int32_t *)(b->h_in + b->off_ids);
    int32_t *hsel = (int32_t *)(b->h_in + b->off_sel);
    for (int i = 0; i < R; i++) {
        ht[i] = tokens[i], hp[i] = pos[i];
        for (int32_t l = 0; l < m->n_layer; l++) {
            kc[(size_t)l * C + i] = seqs[i]->k[l], vc[(size_t)l * C + i] = seqs[i]->v[l];
            hs[(size_t)l * C + i] = seqs[i]->slots[l];
        }
    }
    for (int i = 0; i < n_out; i++) {
        hsel[i] = out_rows[i];
        request_ids(&req[i], hi + (size_t)i * CQ_TOP_MAX_IDS);
    }
    CUDA_TRY(cudaMemcpyAsync(b->in, b->h_in, b->in_bytes, cudaMemcpyHostToDevice, cm->stream));
    if ((st = enqueue_batch(cm, b, R, n_out, err))) return st;
    if (n_out)
        CUDA_TRY(cudaMemcpyAsync(b->h_out, b->out, (size_t)n_out * sizeof *b->out, cudaMemcpyDeviceToHost, cm->stream));
    CUDA_TRY(cudaStreamSynchronize(cm->stream));
    for (int i = 0; i < n_out; i++) top_to_host(&b->h_out[i], m->n_vocab, &req[i], &out[i]);
    return CQ_OK;
}

/* The longest common prefix of two token runs. */
static int32_t common_run(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    int32_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

extern "C" cq_status cq_cuda_score_packed(cq_cuda_seq *s, const int32_t *tokens, const int32_t *starts, size_t n,
                                          const int32_t *ids, int n_ids, int32_t min_share, int64_t *shared,
                                          float *out, cq_err *err) {
    cq_cuda_model *cm = s->cm;
    const cq_gemma *m = cm->m;
    const int32_t total = starts[n];
    if (shared) *shared = 0;
    if (!s->flat || total > s->max_tokens || n_ids < 1 || n_ids > CQ_CUDA_SCORE_MAX_IDS)
        return cq_err_set(err, CQ_ERR_INVALID, "packed scoring: %d tokens, %d ids do not fit this sequence", total, n_ids);
    if (n == 0) return CQ_OK;
    /* The stored stream: prompts in token order when sharing (prompts with a common beginning become neighbours), a
     * prompt whose first c >= min_share tokens are the last whole-stored prompt's (its leader's) stored from token c
     * on, reading the leader's rows for [0, c) (packed_keys); c < its length, so its last token is its own. */
    size_t *order = (size_t *)malloc(n * sizeof *order);
    int32_t *own = (int32_t *)malloc((n + 1) * sizeof *own), *pre = (int32_t *)malloc(n * sizeof *pre);
    int32_t *clen = (int32_t *)malloc(n * sizeof *clen), *stream = (int32_t *)malloc((size_t)total * sizeof *stream);
    float *got = (float *)malloc(n * (size_t)n_ids * sizeof *got);
    cq_status st = order && own && pre && clen && stream && got ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    int32_t stored = 0;
    for (size_t i = 0; !st && i < n; i++) {
        size_t j = i; /* insertion in token order (a prefix first); the caller's order when not sharing */
        const int32_t *a = tokens + starts[i], na = starts[i + 1] - starts[i];
        while (j > 0 && min_share > 0) {
            const size_t o = order[j - 1];
            const int32_t *b = tokens + starts[o], nb = starts[o + 1] - starts[o], c = common_run(a, na, b, nb);
            if (!((c == na && na < nb) || (c < na && c < nb && a[c] < b[c]))) break; /* a before b? */
            order[j] = o, j--;
        }
        order[j] = i;
    }
    for (size_t k = 0, leader = SIZE_MAX; !st && k < n; k++) {
        const size_t i = order[k];
        const int32_t *a = tokens + starts[i], na = starts[i + 1] - starts[i];
        int32_t c = 0;
        if (min_share > 0 && leader != SIZE_MAX) {
            const size_t l = order[leader];
            c = common_run(a, na, tokens + starts[l], starts[l + 1] - starts[l]);
            if (c >= na) c = na - 1;
            if (c < min_share) c = 0;
        }
        if (!c) leader = k;
        clen[k] = c, pre[k] = c ? own[leader] : 0, own[k] = stored;
        memcpy(stream + stored, a + c, (size_t)(na - c) * sizeof *stream);
        stored += na - c;
        if (shared) *shared += c;
    }
    if (!st) own[n] = stored;
    if (!st) {
        cudaError_t e = cudaMemcpyAsync(s->sel_ids, ids, (size_t)n_ids * sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream);
        if (e != cudaSuccess) st = cq_err_set(err, CQ_ERR_DEVICE, "packed scoring: %s", cudaGetErrorString(e));
    }
    /* per chunk: each token's position in its prompt, its own rows' start, its shared prefix, the rows that end a
     * prompt. Pageable host arrays: cudaMemcpyAsync stages them before it returns, so the next chunk may refill them. */
    int32_t rope[CQ_CUDA_BATCH], start[CQ_CUDA_BATCH], pstart[CQ_CUDA_BATCH], plen[CQ_CUDA_BATCH], rows[CQ_CUDA_BATCH];
    size_t prompt = 0, done = 0; /* the prompt of the chunk's first token; prompts whose logits are queued */
    for (int32_t c0 = 0; !st && c0 < stored; c0 += CQ_CUDA_BATCH) {
        const int T = stored - c0 < CQ_CUDA_BATCH ? (int)(stored - c0) : CQ_CUDA_BATCH;
        while (own[prompt + 1] <= c0) prompt++;
        int n_rows = 0;
        int32_t key0 = own[prompt];
        for (int t = 0, p = (int)prompt; t < T; t++) {
            while (own[p + 1] <= c0 + t) p++;
            rope[t] = clen[p] + c0 + t - own[p];
            start[t] = own[p], pstart[t] = pre[p], plen[t] = clen[p];
            if (clen[p] && pre[p] < key0) key0 = pre[p];
            if (c0 + t == own[p + 1] - 1) rows[n_rows++] = t;
        }
        const int32_t pos0 = c0;
        cudaError_t e = cudaMemcpyAsync(s->tokens, stream + c0, (size_t)T * sizeof(int32_t), cudaMemcpyHostToDevice,
                                        cm->stream);
        if (e == cudaSuccess) e = cudaMemcpyAsync(s->pos, &pos0, sizeof pos0, cudaMemcpyHostToDevice, cm->stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(s->rope_pos, rope, (size_t)T * sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(s->seq_start, start, (size_t)T * sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(s->pre_start, pstart, (size_t)T * sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(s->pre_len, plen, (size_t)T * sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream);
        if (e == cudaSuccess && n_rows)
            e = cudaMemcpyAsync(s->sel_rows, rows, (size_t)n_rows * sizeof(int32_t), cudaMemcpyHostToDevice, cm->stream);
        if (e != cudaSuccess) {
            st = cq_err_set(err, CQ_ERR_DEVICE, "packed scoring: %s", cudaGetErrorString(e));
            break;
        }
        s->packed = true, s->key0 = key0;
        st = enqueue_chunk(s, T, c0, err);
        s->packed = false;
        if (st) break;
        if (n_rows) {
            const int warps = n_rows * n_ids;
            select_logits_kernel<<<(unsigned)((warps + 7) / 8), 256, 0, cm->stream>>>(
                s->xn, m->n_embd, s->sel_rows, n_rows, cm->output, s->sel_ids, n_ids, m->final_softcap,
                s->sel_out + done * n_ids);
            e = cudaGetLastError();
            if (e != cudaSuccess) st = cq_err_set(err, CQ_ERR_DEVICE, "packed scoring: %s", cudaGetErrorString(e));
            done += (size_t)n_rows;
        }
    }
    if (!st) {
        cudaError_t e = cudaMemcpyAsync(got, s->sel_out, n * n_ids * sizeof(float), cudaMemcpyDeviceToHost, cm->stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(cm->stream);
        if (e != cudaSuccess) st = cq_err_set(err, CQ_ERR_DEVICE, "packed scoring: %s", cudaGetErrorString(e));
    }
    for (size_t k = 0; !st && k < n; k++) /* stored order back to the caller's */
        memcpy(out + order[k] * n_ids, got + k * n_ids, (size_t)n_ids * sizeof *out);
    free(order), free(own), free(pre), free(clen), free(stream), free(got);
    return st;
}

/* ---- single kernels for the tests ---------------------------------------------------------------------------- */

/* Device copies of host arrays, freed together. */
typedef struct {
    void *p[16];
    int n;
} dev_set;
/* at most 16 buffers per test call */

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

/* n cache values as a cache of that type holds them: floats, or rounded to bf16 (nearest even, cq_f32_to_bf16) */
static cq_status dev_copy_kv(dev_set *ds, const float *host, size_t n, bool kv16, void **out, cq_err *err) {
    if (!kv16) return dev_copy(ds, host, n * sizeof(float), out, err);
    uint16_t *h = (uint16_t *)malloc((n ? n : 1) * sizeof(uint16_t));
    if (!h) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) h[i] = cq_f32_to_bf16(host[i]);
    cq_status s = dev_copy(ds, h, n * sizeof(uint16_t), out, err);
    free(h);
    return s;
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

extern "C" cq_status cq_cuda_op_bias_rope(float *x, int rows, int head_dim, const int32_t *pos, const float *bias,
                                          float base, cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    /* qwen2's path of the fused kernel: no norm weights (no QK-norm), row r's bias added before RoPE */
    const int half = head_dim / 2;
    double *freq = (double *)malloc((size_t)half * sizeof(double));
    if (!freq) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    rope_freqs(freq, head_dim, base, 1.0f);
    dev_set ds = {{0}, 0};
    float *dx, *db, *dk;
    double *df;
    int32_t *dpos;
    cq_status s;
    if ((s = dev_copy(&ds, x, (size_t)rows * head_dim * 4, (void **)&dx, err)) ||
        (s = dev_copy(&ds, bias, (size_t)rows * head_dim * 4, (void **)&db, err)) ||
        (s = dev_copy(&ds, freq, (size_t)half * 8, (void **)&df, err)) ||
        (s = dev_copy(&ds, pos, (size_t)rows * sizeof(int32_t), (void **)&dpos, err)) ||
        (s = dev_copy(&ds, NULL, (size_t)head_dim * 4, (void **)&dk, err))) {
        dev_free(&ds);
        free(freq);
        return s;
    }
    for (int r = 0; r < rows; r++)
        qk_norm_rope_store_kernel<float><<<1, half>>>(dx + (size_t)r * head_dim, dk, dk, NULL, NULL, db + (size_t)r * head_dim,
                                               NULL, NULL, df, dk, dk, 1, 0, head_dim, dpos + r, NULL, 1, 0, 1e-6f,
                                               NO_ROWS);
    cudaError_t e = cudaMemcpy(x, dx, (size_t)rows * head_dim * 4, cudaMemcpyDeviceToHost);
    dev_free(&ds);
    free(freq);
    if (e != cudaSuccess) return cq_err_set(err, CQ_ERR_DEVICE, "bias rope: %s", cudaGetErrorString(e));
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
        qk_norm_rope_store_kernel<float><<<1, half>>>(dx + (size_t)r * head_dim, dk, dk, dw, dw, NULL, NULL, NULL, df, dk, dk, 1,
                                               0, head_dim,
                                               dpos + r, NULL, 1, 0, 0.0f, NO_ROWS);
    cudaError_t e = cudaMemcpy(x, dx, (size_t)rows * head_dim * 4, cudaMemcpyDeviceToHost);
    dev_free(&ds);
    free(freq), free(ones);
    if (e != cudaSuccess) return cq_err_set(err, CQ_ERR_DEVICE, "rope: %s", cudaGetErrorString(e));
    return CQ_OK;
}

static cq_status op_glu(float *y, const float *u, int n, int silu, cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    dev_set ds = {{0}, 0};
    float *dy, *du;
    cq_status s;
    if ((s = dev_copy(&ds, y, (size_t)n * 4, (void **)&dy, err)) || (s = dev_copy(&ds, u, (size_t)n * 4, (void **)&du, err))) {
        dev_free(&ds);
        return s;
    }
    geglu_kernel<<<blocks_for((size_t)n, 256), 256>>>(dy, du, (size_t)n, silu, 1);
    cudaError_t e = cudaMemcpy(y, dy, (size_t)n * 4, cudaMemcpyDeviceToHost);
    dev_free(&ds);
    if (e != cudaSuccess) return cq_err_set(err, CQ_ERR_DEVICE, "geglu: %s", cudaGetErrorString(e));
    return CQ_OK;
}

extern "C" cq_status cq_cuda_op_geglu(float *y, const float *u, int n, cq_err *err) { return op_glu(y, u, n, 0, err); }
extern "C" cq_status cq_cuda_op_swiglu(float *y, const float *u, int n, cq_err *err) { return op_glu(y, u, n, 1, err); }

/* The consumers of a batched step's GEMM outputs over planes (issue 31), each against a C twin of the summed planes:
 * geglu_kernel (y = gelu(sum of yp) * sum of up, yp and up planes x n), addnorm_kernel (o planes x rows x n; x, xn
 * rows x n) and qk_norm_rope_store_kernel (rows tokens at positions pos0.., one query and one key head each, q and k
 * and v planes x rows x head_dim; the query rotated in place of its first plane, the key and value stored in a flat
 * cache of rows slots; unit norm weights). */
extern "C" cq_status cq_cuda_op_geglu_planes(float *y, const float *yp, const float *up, int n, int planes, cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    dev_set ds = {{0}, 0};
    float *dy, *du;
    const size_t bytes = (size_t)planes * n * 4;
    cq_status s;
    if ((s = dev_copy(&ds, yp, bytes, (void **)&dy, err)) || (s = dev_copy(&ds, up, bytes, (void **)&du, err))) {
        dev_free(&ds);
        return s;
    }
    geglu_kernel<<<blocks_for((size_t)n, 256), 256>>>(dy, du, (size_t)n, 0, planes);
    cudaError_t e = cudaMemcpy(y, dy, (size_t)n * 4, cudaMemcpyDeviceToHost);
    dev_free(&ds);
    if (e != cudaSuccess) return cq_err_set(err, CQ_ERR_DEVICE, "geglu planes: %s", cudaGetErrorString(e));
    return CQ_OK;
}

extern "C" cq_status cq_cuda_op_addnorm_planes(float *x, float *xn, const float *o, const float *w_post,
                                               const float *w_next, int rows, int n, float eps, int planes,
                                               cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    dev_set ds = {{0}, 0};
    float *dx, *dxn, *dout, *dwp, *dwn;
    const size_t rn = (size_t)rows * n;
    cq_status s;
    if ((s = dev_copy(&ds, x, rn * 4, (void **)&dx, err)) || (s = dev_copy(&ds, NULL, rn * 4, (void **)&dxn, err)) ||
        (s = dev_copy(&ds, o, (size_t)planes * rn * 4, (void **)&dout, err)) ||
        (s = dev_copy(&ds, w_post, (size_t)n * 4, (void **)&dwp, err)) ||
        (s = dev_copy(&ds, w_next, (size_t)n * 4, (void **)&dwn, err))) {
        dev_free(&ds);
        return s;
    }
    addnorm_kernel<<<rows, 256>>>(dx, dout, dwp, dwn, dxn, n, eps, planes);
    cudaError_t e = cudaMemcpy(x, dx, rn * 4, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) e = cudaMemcpy(xn, dxn, rn * 4, cudaMemcpyDeviceToHost);
    dev_free(&ds);
    if (e != cudaSuccess) return cq_err_set(err, CQ_ERR_DEVICE, "addnorm planes: %s", cudaGetErrorString(e));
    return CQ_OK;
}

extern "C" cq_status cq_cuda_op_qk_store_planes(const float *q, const float *k, const float *v, int rows, int head_dim,
                                                int32_t pos0, float base, int planes, float *q_out, float *k_out,
                                                float *v_out, cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    const int half = head_dim / 2;
    const size_t rn = (size_t)rows * head_dim, pb = (size_t)planes * rn * 4;
    double *freq = (double *)malloc((size_t)half * sizeof(double));
    float *ones = (float *)malloc((size_t)head_dim * sizeof(float));
    if (!freq || !ones) {
        free(freq), free(ones);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    rope_freqs(freq, head_dim, base, 1.0f);
    for (int i = 0; i < head_dim; i++) ones[i] = 1.0f;
    dev_set ds = {{0}, 0};
    float *dq, *dk, *dv, *dw, *kc, *vc;
    double *df;
    int32_t *dpos;
    cq_status s;
    if ((s = dev_copy(&ds, q, pb, (void **)&dq, err)) || (s = dev_copy(&ds, k, pb, (void **)&dk, err)) ||
        (s = dev_copy(&ds, v, pb, (void **)&dv, err)) ||
        (s = dev_copy(&ds, ones, (size_t)head_dim * 4, (void **)&dw, err)) ||
        (s = dev_copy(&ds, freq, (size_t)half * 8, (void **)&df, err)) ||
        (s = dev_copy(&ds, &pos0, sizeof pos0, (void **)&dpos, err)) ||
        (s = dev_copy(&ds, NULL, rn * 4, (void **)&kc, err)) || (s = dev_copy(&ds, NULL, rn * 4, (void **)&vc, err))) {
        dev_free(&ds);
        free(freq), free(ones);
        return s;
    }
    batch_rows br = NO_ROWS; /* no rows' own positions or caches: the planes only */
    br.planes = planes;
    /* a ring of rows slots: position pos0 + t at slot (pos0 + t) % rows */
    qk_norm_rope_store_kernel<float><<<rows * 2, half>>>(dq, dk, dv, dw, dw, NULL, NULL, NULL, df, kc, vc, 1, 1,
                                                         head_dim, dpos, NULL, rows, 1, 0.0f, br);
    float *hk = (float *)malloc(2 * rn * 4);
    cudaError_t e = hk ? cudaMemcpy(q_out, dq, rn * 4, cudaMemcpyDeviceToHost) : cudaErrorMemoryAllocation;
    if (e == cudaSuccess) e = cudaMemcpy(hk, kc, rn * 4, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) e = cudaMemcpy(hk + rn, vc, rn * 4, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        for (int t = 0; t < rows; t++) {
            const size_t slot = (size_t)((pos0 + t) % rows) * head_dim;
            memcpy(k_out + (size_t)t * head_dim, hk + slot, (size_t)head_dim * 4);
            memcpy(v_out + (size_t)t * head_dim, hk + rn + slot, (size_t)head_dim * 4);
        }
    free(hk);
    dev_free(&ds);
    free(freq), free(ones);
    if (e != cudaSuccess) return cq_err_set(err, CQ_ERR_DEVICE, "qk store planes: %s", cudaGetErrorString(e));
    return CQ_OK;
}

extern "C" cq_status cq_cuda_op_attention(const float *q, const float *k, const float *v, int n_q, int n_keys,
                                          int head_dim, int window, float scale, float softcap, bool kv_bf16,
                                          float *out, cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    if (head_dim % 32 || head_dim > 32 * MAX_HD_PER_LANE || n_q > n_keys)
        return cq_err_set(err, CQ_ERR_INVALID, "attention test: bad shape");
    const size_t part_floats = (size_t)n_q * 64 * (head_dim + 2);
    dev_set ds = {{0}, 0};
    float *dq, *dp, *dout;
    void *dk, *dv;
    int32_t pos0 = n_keys - n_q, *dpos;
    cq_status s;
    if ((s = dev_copy(&ds, &pos0, sizeof pos0, (void **)&dpos, err)) ||
        (s = dev_copy(&ds, q, (size_t)n_q * head_dim * 4, (void **)&dq, err)) ||
        (s = dev_copy_kv(&ds, k, (size_t)n_keys * head_dim, kv_bf16, &dk, err)) ||
        (s = dev_copy_kv(&ds, v, (size_t)n_keys * head_dim, kv_bf16, &dv, err)) ||
        (s = dev_copy(&ds, NULL, part_floats * 4, (void **)&dp, err)) ||
        (s = dev_copy(&ds, NULL, (size_t)n_q * head_dim * 4, (void **)&dout, err))) {
        dev_free(&ds);
        return s;
    }
    cq_cuda_model tmp; /* attention() only uses the stream, cuBLAS and (bf16) the float scratch */
    memset(&tmp, 0, sizeof tmp);
    float *dsc = NULL;
    const size_t sc_floats = (size_t)n_q * n_keys;
    if (n_q > 1 && n_keys <= ATT_GEMM_MAX_KEYS) { /* the cuBLAS path, as a prefill chunk takes it */
        s = dev_copy(&ds, NULL, sc_floats * 4, (void **)&dsc, err);
        if (!s && kv_bf16) s = dev_copy(&ds, NULL, 2 * (size_t)n_keys * head_dim * 4, (void **)&tmp.kv_scratch, err);
        tmp.kv_scratch_keys = n_keys;
    }
    if (!s && cublasCreate(&tmp.blas) != CUBLAS_STATUS_SUCCESS) s = cq_err_set(err, CQ_ERR_DEVICE, "cublasCreate");
    if (!s)
        s = attention(&tmp, dq, dk, dv, kv_bf16, dp, part_floats, dsc, sc_floats, dout, n_q, 1, 1, head_dim, dpos, pos0,
                      NOT_PACKED, 0, window > 0 && n_keys > window ? window : n_keys, window, n_keys, 0, scale, softcap,
                      err);
    if (tmp.blas) cublasDestroy(tmp.blas);
    cudaError_t e = cudaMemcpy(out, dout, (size_t)n_q * head_dim * 4, cudaMemcpyDeviceToHost);
    dev_free(&ds);
    if (!s && e != cudaSuccess) s = cq_err_set(err, CQ_ERR_DEVICE, "attention: %s", cudaGetErrorString(e));
    return s;
}

extern "C" cq_status cq_cuda_op_decode_attention(const float *q, int n_head, const float *k, const float *v, int n_keys,
                                                 int head_dim, int window, float scale, float softcap, bool kv_bf16,
                                                 float *out, cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    if (head_dim % 64 || head_dim > 32 * MAX_HD_PER_LANE || n_keys < 1 || n_head < 1)
        return cq_err_set(err, CQ_ERR_INVALID, "decode attention test: bad shape");
    const size_t hd = (size_t)head_dim, f = sizeof(float);
    const int32_t pos = n_keys - 1;
    const int splits = dec_splits_for(window > 0 && window < n_keys ? window : n_keys);
    float *ones = (float *)malloc(hd * f);
    double *zeros = (double *)calloc(hd / 2, sizeof(double)); /* RoPE at angle 0: the identity */
    if (!ones || !zeros) {
        free(ones), free(zeros);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < hd; i++) ones[i] = 1.0f;
    dev_set ds = {{0}, 0};
    float *dq, *dkn, *dvn, *dw, *dpart, *dout;
    void *dkc, *dvc;
    double *dfreq;
    int32_t *dpos;
    unsigned *dcount;
    cq_status s;
    const size_t ek = kv_bf16 ? sizeof(bf16) : sizeof(float);
    if ((s = dev_copy(&ds, &pos, sizeof pos, (void **)&dpos, err)) ||
        (s = dev_copy(&ds, q, n_head * hd * f, (void **)&dq, err)) ||
        (s = dev_copy_kv(&ds, k, (size_t)n_keys * hd, kv_bf16, &dkc, err)) ||
        (s = dev_copy_kv(&ds, v, (size_t)n_keys * hd, kv_bf16, &dvc, err)) ||
        (s = dev_copy(&ds, k + (size_t)pos * hd, hd * f, (void **)&dkn, err)) ||
        (s = dev_copy(&ds, v + (size_t)pos * hd, hd * f, (void **)&dvn, err)) ||
        (s = dev_copy(&ds, ones, hd * f, (void **)&dw, err)) ||
        (s = dev_copy(&ds, zeros, hd / 2 * sizeof(double), (void **)&dfreq, err)) ||
        (s = dev_copy(&ds, NULL, (size_t)n_head * splits * (hd + 2) * f, (void **)&dpart, err)) ||
        (s = dev_copy(&ds, NULL, (size_t)n_head * sizeof(unsigned), (void **)&dcount, err)) ||
        (s = dev_copy(&ds, NULL, n_head * hd * f, (void **)&dout, err))) {
        dev_free(&ds);
        free(ones), free(zeros);
        return s;
    }
    cudaError_t e = cudaMemset(dcount, 0, (size_t)n_head * sizeof(unsigned));
    if (e == cudaSuccess) /* NaN (float or bf16): the slot must not be read */
        e = cudaMemset((char *)dkc + (size_t)pos * hd * ek, 0xff, hd * ek);
    if (e == cudaSuccess) {
        dec_attention_for(head_dim, kv_bf16)<<<dim3(n_head, splits), 32 * ATT_WARPS>>>(
            dq, dkn, dvn, dw, dw, NULL, NULL, NULL, dfreq, dkc, dvc, dpart, dcount, dout, n_head, 1, head_dim, dpos,
            window, n_keys, 0, scale, softcap, 1e-6f);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpy(out, dout, n_head * hd * f, cudaMemcpyDeviceToHost);
    dev_free(&ds);
    free(ones), free(zeros);
    if (e != cudaSuccess) return cq_err_set(err, CQ_ERR_DEVICE, "decode attention: %s", cudaGetErrorString(e));
    return CQ_OK;
}

/* The op twins' model of what the logits kernels read: the output matrix (Q8_0 or bf16) and the grid. */
static cq_status logits_model(const cq_gemma *m, cq_cuda_model *tmp, dmat *emb, cq_err *err) {
    memset(tmp, 0, sizeof *tmp);
    tmp->m = m;
    memset(emb, 0, sizeof *emb);
    cq_status s = upload_q8(&m->output, &tmp->emb_q, &tmp->emb_d, err);
    if (!s && !tmp->emb_q) s = upload_matrix(&m->output, emb, err);
    tmp->token_embd = tmp->output = emb->w;
    tmp->logit_blocks = 1024;
    return s;
}

static void logits_model_free(cq_cuda_model *tmp, dmat *emb) { cudaFree(emb->w), cudaFree(tmp->emb_q), cudaFree(tmp->emb_d); }

extern "C" cq_status cq_cuda_op_logits(const cq_gemma *m, const float *x, float *y, cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    cq_cuda_model tmp; /* what dec_logits reads: the output matrix, the grid, the stream */
    dmat emb;
    dev_set ds = {{0}, 0};
    float *dx = NULL, *dy = NULL;
    const size_t d = (size_t)m->n_embd, V = (size_t)m->n_vocab;
    cq_status s = logits_model(m, &tmp, &emb, err);
    if (!s) s = dev_copy(&ds, x, d * 4, (void **)&dx, err);
    if (!s) s = dev_copy(&ds, NULL, V * 4, (void **)&dy, err);
    if (!s) s = dec_logits(&tmp, false, pro_copy(dx, (int)d), dy, NULL, err);
    if (!s) {
        cudaError_t e = cudaMemcpy(y, dy, V * 4, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) s = cq_err_set(err, CQ_ERR_DEVICE, "logits: %s", cudaGetErrorString(e));
    }
    dev_free(&ds);
    logits_model_free(&tmp, &emb);
    return s;
}

extern "C" cq_status cq_cuda_op_logits_rows(const cq_gemma *m, const float *x, int n, float *y, cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    if (n < 1) return cq_err_set(err, CQ_ERR_INVALID, "logits of %d rows", n);
    cq_cuda_model tmp; /* what rows_logits reads: the output matrix, the grid, the stream */
    dmat emb;
    dev_set ds = {{0}, 0};
    float *dx = NULL, *dy = NULL;
    const size_t d = (size_t)m->n_embd, V = (size_t)m->n_vocab;
    cq_status s = logits_model(m, &tmp, &emb, err);
    if (!s && rows_logits_smem((int)d) > 48 * 1024) {
        const void *rk = tmp.emb_q ? (const void *)rows_logits_q8_for((int)d) : (const void *)rows_logits_bf16_kernel;
        cudaError_t e = cudaFuncSetAttribute(rk, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)rows_logits_smem((int)d));
        if (e != cudaSuccess) s = cq_err_set(err, CQ_ERR_DEVICE, "logits rows: %s", cudaGetErrorString(e));
    }
    if (!s) s = dev_copy(&ds, x, (size_t)n * d * 4, (void **)&dx, err);
    if (!s) s = dev_copy(&ds, NULL, (size_t)n * V * 4, (void **)&dy, err);
    if (!s) s = rows_logits(&tmp, dx, n, dy, err);
    if (!s) {
        cudaError_t e = cudaMemcpy(y, dy, (size_t)n * V * 4, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) s = cq_err_set(err, CQ_ERR_DEVICE, "logits rows: %s", cudaGetErrorString(e));
    }
    dev_free(&ds);
    logits_model_free(&tmp, &emb);
    return s;
}

extern "C" cq_status cq_cuda_op_logits_gemm(const cq_gemma *m, const float *x, int n, int planes, float *y,
                                            cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    if (n < 1 || planes < 1 || planes > 3)
        return cq_err_set(err, CQ_ERR_INVALID, "logits GEMM of %d rows in %d planes (1 to 3)", n, planes);
    cq_cuda_model tmp; /* what gemm_logits reads: the output matrix's bf16 copy, cuBLAS, the stream */
    memset(&tmp, 0, sizeof tmp);
    tmp.m = m;
    dec_batch b;
    memset(&b, 0, sizeof b);
    b.logit_planes = planes;
    cublasStatus_t bs = cublasCreate(&tmp.blas);
    if (bs != CUBLAS_STATUS_SUCCESS) return cq_err_set(err, CQ_ERR_DEVICE, "cuBLAS: status %d", (int)bs);
    dmat emb = {NULL, 0, 0};
    dev_set ds = {{0}, 0};
    float *dx = NULL;
    const size_t d = (size_t)m->n_embd, V = (size_t)m->n_vocab;
    cq_status s = upload_matrix(&m->output, &emb, err);
    tmp.output = emb.w;
    if (!s) s = dev_copy(&ds, x, (size_t)n * d * 4, (void **)&dx, err);
    if (!s) s = dev_copy(&ds, NULL, (size_t)planes * n * d * sizeof(bf16), (void **)&b.xb, err);
    if (!s) s = dev_copy(&ds, NULL, (size_t)planes * n * V * 4, (void **)&b.logits, err);
    if (!s) s = gemm_logits(&tmp, &b, dx, n, err);
    if (!s) {
        cudaError_t e = cudaMemcpy(y, b.logits, (size_t)n * V * 4, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) s = cq_err_set(err, CQ_ERR_DEVICE, "logits GEMM: %s", cudaGetErrorString(e));
    }
    dev_free(&ds);
    cudaFree(emb.w);
    cublasDestroy(tmp.blas);
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
    if (!s && n_tokens == 1) /* the decode kernel */
        s = dec_mv(&tmp, false, &dw, dy, NULL, NULL, NULL, NULL, pro_copy(dx, (int)w->cols), err);
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

extern "C" cq_status cq_cuda_op_matmul_planes(const cq_wmat *w, const float *x, int n_tokens, int planes, float *y,
                                              cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    if (n_tokens < 1 || planes < 1 || planes > 3)
        return cq_err_set(err, CQ_ERR_INVALID, "matmul of %d rows in %d planes (1 to 3)", n_tokens, planes);
    const size_t nx = (size_t)n_tokens * w->cols, ny = (size_t)n_tokens * w->rows;
    float *host = (float *)malloc((size_t)planes * ny * sizeof(float));
    if (!host) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_cuda_model tmp;
    memset(&tmp, 0, sizeof tmp);
    cublasStatus_t bs = cublasCreate(&tmp.blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        free(host);
        return cq_err_set(err, CQ_ERR_DEVICE, "cuBLAS: status %d", (int)bs);
    }
    dmat dw = {NULL, 0, 0};
    dev_set ds = {{0}, 0};
    float *dx, *dy;
    bf16 *dxb;
    cq_status s = upload_matrix(w, &dw, err);
    if (!s) s = dev_copy(&ds, x, nx * 4, (void **)&dx, err);
    if (!s) s = dev_copy(&ds, NULL, (size_t)planes * nx * sizeof(bf16), (void **)&dxb, err);
    if (!s) s = dev_copy(&ds, NULL, (size_t)planes * ny * 4, (void **)&dy, err);
    if (!s) s = to_planes(&tmp, dx, dxb, nx, planes, err);
    if (!s) s = gemm(&tmp, &dw, dxb, planes * n_tokens, dy, err);
    if (!s) {
        cudaError_t e = cudaMemcpy(host, dy, (size_t)planes * ny * 4, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) s = cq_err_set(err, CQ_ERR_DEVICE, "matmul planes: %s", cudaGetErrorString(e));
    }
    if (!s) /* the planes summed in plane_sum's order */
        for (size_t i = 0; i < ny; i++) {
            float v = host[i];
            for (int p = 1; p < planes; p++) v += host[(size_t)p * ny + i];
            y[i] = v;
        }
    dev_free(&ds);
    cudaFree(dw.w);
    cublasDestroy(tmp.blas);
    free(host);
    return s;
}

extern "C" cq_status cq_cuda_op_attention_packed(const float *q, const float *k, const float *v, const int32_t *starts,
                                                 int n_prompts, int n_q, int head_dim, int window, float scale,
                                                 float softcap, bool gemm_path, bool kv_bf16, const int32_t *pre_len,
                                                 float *out, cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    const int32_t n = starts[n_prompts], pos0 = n - n_q;
    if (head_dim % 32 || head_dim > 32 * MAX_HD_PER_LANE || n_q < 1 || n_q > n || n_q > CQ_CUDA_BATCH)
        return cq_err_set(err, CQ_ERR_INVALID, "packed attention test: bad shape");
    int32_t *first = (int32_t *)malloc((size_t)n_q * 3 * sizeof(int32_t)), *pstart = first + n_q, *plen = first + 2 * n_q;
    if (!first) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    int32_t key0 = n;
    for (int t = 0, p = 0; t < n_q; t++) { /* the start of each query's prompt, and its shared prefix */
        while (starts[p + 1] <= pos0 + t) p++;
        first[t] = starts[p];
        int l = p; /* the leader: the nearest prompt before stored whole */
        while (l > 0 && pre_len && pre_len[l]) l--;
        plen[t] = pre_len ? pre_len[p] : 0, pstart[t] = plen[t] ? starts[l] : 0;
        const int32_t need = plen[t] ? pstart[t] : first[t]; /* the earliest row the query reads */
        key0 = need < key0 ? need : key0;
    }
    const size_t part_floats = (size_t)n_q * 64 * (head_dim + 2), sc_floats = (size_t)n_q * (n - key0);
    dev_set ds = {{0}, 0};
    float *dq, *dp, *dout, *dsc = NULL;
    void *dk, *dv;
    int32_t *dpos, *dfirst, *dpstart, *dplen;
    cq_status s;
    cq_cuda_model tmp; /* attention() only uses the stream, cuBLAS and (bf16) the float scratch */
    memset(&tmp, 0, sizeof tmp);
    if ((s = dev_copy(&ds, &pos0, sizeof pos0, (void **)&dpos, err)) ||
        (s = dev_copy(&ds, first, (size_t)n_q * sizeof(int32_t), (void **)&dfirst, err)) ||
        (s = dev_copy(&ds, pstart, (size_t)n_q * sizeof(int32_t), (void **)&dpstart, err)) ||
        (s = dev_copy(&ds, plen, (size_t)n_q * sizeof(int32_t), (void **)&dplen, err)) ||
        (s = dev_copy(&ds, q, (size_t)n_q * head_dim * 4, (void **)&dq, err)) ||
        (s = dev_copy_kv(&ds, k, (size_t)n * head_dim, kv_bf16, &dk, err)) ||
        (s = dev_copy_kv(&ds, v, (size_t)n * head_dim, kv_bf16, &dv, err)) ||
        (s = dev_copy(&ds, NULL, part_floats * 4, (void **)&dp, err)) ||
        (s = dev_copy(&ds, NULL, (size_t)n_q * head_dim * 4, (void **)&dout, err)) ||
        (gemm_path && (s = dev_copy(&ds, NULL, sc_floats * 4, (void **)&dsc, err))) ||
        (gemm_path && kv_bf16 && (s = dev_copy(&ds, NULL, 2 * (size_t)n * head_dim * 4, (void **)&tmp.kv_scratch, err)))) {
        dev_free(&ds);
        free(first);
        return s;
    }
    tmp.kv_scratch_keys = tmp.kv_scratch ? n : 0;
    if (cublasCreate(&tmp.blas) != CUBLAS_STATUS_SUCCESS) s = cq_err_set(err, CQ_ERR_DEVICE, "cublasCreate");
    if (!s)
        s = attention(&tmp, dq, dk, dv, kv_bf16, dp, part_floats, dsc, sc_floats, dout, n_q, 1, 1, head_dim, dpos, pos0,
                      packed_keys{dfirst, dpstart, dplen}, key0, window > 0 && n > window ? window : n, window, n, 0,
                      scale, softcap, err);
    if (tmp.blas) cublasDestroy(tmp.blas);
    cudaError_t e = cudaMemcpy(out, dout, (size_t)n_q * head_dim * 4, cudaMemcpyDeviceToHost);
    dev_free(&ds);
    free(first);
    if (!s && e != cudaSuccess) s = cq_err_set(err, CQ_ERR_DEVICE, "packed attention: %s", cudaGetErrorString(e));
    return s;
}

extern "C" cq_status cq_cuda_op_lora_merge(const cq_wmat *w, const float *a, const float *b, int rank, float scale,
                                           float *out, cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    cq_cuda_model tmp; /* what merge_upload uses: the stream (default) and cuBLAS */
    memset(&tmp, 0, sizeof tmp);
    CUBLAS_TRY(cublasCreate(&tmp.blas));
    const size_t n = (size_t)w->rows * w->cols, side = (size_t)(w->rows > w->cols ? w->rows : w->cols);
    dev_set ds = {{0}, 0};
    merge_bufs bufs = {NULL, NULL, NULL};
    bf16 *dw = NULL;
    uint16_t *host = (uint16_t *)malloc(n * sizeof(uint16_t));
    cq_status s = host ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!s) s = dev_copy(&ds, NULL, n * 4, (void **)&bufs.w, err);
    if (!s) s = dev_copy(&ds, NULL, (size_t)rank * side * 4, (void **)&bufs.a, err);
    if (!s) s = dev_copy(&ds, NULL, (size_t)rank * side * 4, (void **)&bufs.b, err);
    if (!s) s = dev_copy(&ds, NULL, n * sizeof(bf16), (void **)&dw, err);
    if (!s) s = merge_upload(&tmp, w, a, b, rank, scale, &bufs, dw, err);
    if (!s) {
        cudaError_t e = cudaMemcpy(host, dw, n * sizeof(bf16), cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) s = cq_err_set(err, CQ_ERR_DEVICE, "lora merge: %s", cudaGetErrorString(e));
        for (size_t i = 0; !s && i < n; i++) out[i] = cq_bf16_to_f32(host[i]);
    }
    dev_free(&ds);
    free(host);
    cublasDestroy(tmp.blas);
    return s;
}

extern "C" cq_status cq_cuda_op_top(const float *logits, int rows, int n_vocab, const cq_top_request *req,
                                    cq_top *out, cq_err *err) {
    if (!cq_cuda_available()) return cq_err_set(err, CQ_ERR_DEVICE, "no CUDA device is visible");
    const int n_seg = top_segments(n_vocab);
    dev_set ds = {{0}, 0};
    float *dl;
    unsigned long long *keys;
    float2 *ml;
    int32_t *ids;
    top_row *dout;
    int32_t *hids = (int32_t *)malloc((size_t)rows * CQ_TOP_MAX_IDS * sizeof(int32_t));
    top_row *hout = (top_row *)malloc((size_t)rows * sizeof(top_row));
    if (!hids || !hout) {
        free(hids), free(hout);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    for (int r = 0; r < rows; r++) request_ids(&req[r], hids + (size_t)r * CQ_TOP_MAX_IDS);
    cq_status s;
    if (!(s = dev_copy(&ds, logits, (size_t)rows * n_vocab * 4, (void **)&dl, err)) &&
        !(s = dev_copy(&ds, NULL, (size_t)rows * n_seg * CQ_TOP_MAX * 8, (void **)&keys, err)) &&
        !(s = dev_copy(&ds, NULL, (size_t)rows * n_seg * sizeof(float2), (void **)&ml, err)) &&
        !(s = dev_copy(&ds, hids, (size_t)rows * CQ_TOP_MAX_IDS * 4, (void **)&ids, err)) &&
        !(s = dev_copy(&ds, NULL, (size_t)rows * sizeof(top_row), (void **)&dout, err))) {
        top_partial_kernel<<<dim3((unsigned)n_seg, (unsigned)rows), TOP_THREADS>>>(dl, n_vocab, keys, ml);
        top_merge_kernel<<<rows, TOP_THREADS>>>(dl, n_vocab, keys, ml, n_seg, ids, dout);
        cudaError_t e = cudaMemcpy(hout, dout, (size_t)rows * sizeof(top_row), cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) s = cq_err_set(err, CQ_ERR_DEVICE, "candidates: %s", cudaGetErrorString(e));
    }
    for (int r = 0; !s && r < rows; r++) top_to_host(&hout[r], n_vocab, &req[r], &out[r]);
    dev_free(&ds);
    free(hids), free(hout);
    return s;
}
