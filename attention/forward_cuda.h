/* Internal: the CUDA forward of Gemma 3. Weights are dequantized once to bf16 on the GPU; activations, norms and
 * the KV cache stay float32. Prefill products are cuBLAS bf16 x bf16 -> f32 GEMMs; a decode step uses own
 * matrix-vector kernels that read each weight once (q/k/v in one launch, gate/up fused with GeGLU) and is replayed
 * as a CUDA graph. The rest are own kernels: embedding gather, RMSNorm, residual add fused with the next norm,
 * fused QK-norm + RoPE + KV store, attention with an online softmax split over the key range (flash-decoding
 * style, so one KV head still fills the GPU at batch 1).
 * Every kernel has its C twin in forward_cpu.h (cq_op_*), and tests/unit/test_attention_cuda.c compares them.
 * Without CUDA in the build, every function here returns CQ_ERR_UNSUPPORTED. */
#ifndef CQ_ATTENTION_FORWARD_CUDA_H
#define CQ_ATTENTION_FORWARD_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attention/model.h"
#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tokens per forward chunk on the GPU; local layers keep window + CQ_CUDA_BATCH KV slots. */
#define CQ_CUDA_BATCH 512

typedef struct cq_cuda_model cq_cuda_model;
typedef struct cq_cuda_seq cq_cuda_seq;

bool cq_cuda_available(void); /* built with CUDA and a GPU is visible */
cq_status cq_cuda_model_new(const cq_gemma *m, cq_cuda_model **out, cq_err *err);
void cq_cuda_model_free(cq_cuda_model *cm);
cq_status cq_cuda_seq_new(cq_cuda_model *cm, int32_t max_tokens, cq_cuda_seq **out, cq_err *err);
void cq_cuda_seq_free(cq_cuda_seq *s);
/* As cq_cpu_eval: tokens at positions pos.., logits to host memory. */
cq_status cq_cuda_eval(cq_cuda_seq *s, const int32_t *tokens, size_t n, int32_t pos, float *logits, bool all_logits,
                       cq_err *err);

/* ---- single kernels on host data, for the kernel tests (each copies in, runs, copies out) -------------------- */

cq_status cq_cuda_op_rmsnorm(float *out, const float *x, const float *w, int rows, int n, float eps, cq_err *err);
/* rows heads of head_dim each; row r rotates at position pos[r] */
cq_status cq_cuda_op_rope(float *x, int rows, int head_dim, const int32_t *pos, float base, float freq_scale,
                          cq_err *err);
cq_status cq_cuda_op_geglu(float *y, const float *u, int n, cq_err *err);
/* n_q queries (head_dim each) against n_keys keys/values (row stride head_dim); query i sees keys
 * [lo_i, hi_i) with lo_i = max(0, hi_i - window) (window 0: all), hi_i = n_keys - n_q + i + 1 (causal). */
cq_status cq_cuda_op_attention(const float *q, const float *k, const float *v, int n_q, int n_keys, int head_dim,
                               int window, float scale, float softcap, float *out, cq_err *err);
/* y (n_tokens, rows) = x W^T with W converted to bf16, f32 accumulation: one token through the decode kernel (x in
 * float), more through cuBLAS (x rounded to bf16). */
cq_status cq_cuda_op_matmul(const cq_wmat *w, const float *x, int n_tokens, float *y, cq_err *err);

#ifdef __cplusplus
}
#endif

#endif
