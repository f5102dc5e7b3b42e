/* Internal: the CPU forward pass of Gemma 3 (float activations, weights dequantized on the fly), and the plain-C
 * twins of every op that the CUDA kernels are tested against. */
#ifndef CQ_DECODER_FORWARD_CPU_H
#define CQ_DECODER_FORWARD_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decoder/lora.h"
#include "decoder/model.h"
#include "core/threadpool.h"
#include "core/error.h"

/* Tokens per forward chunk; local layers keep window + CQ_CPU_BATCH KV slots. */
#define CQ_CPU_BATCH 64

typedef struct cq_cpu_model cq_cpu_model;
typedef struct cq_cpu_seq cq_cpu_seq;

/* exact: every product in float (see cq_cpu_eval); CLAUSEQA_CPU_EXACT=1 in the environment sets it too. */
cq_status cq_cpu_model_new(const cq_gemma *m, int n_threads, bool exact, cq_cpu_model **out, cq_err *err);
void cq_cpu_model_free(cq_cpu_model *cm);
/* Runs the model with adapter lora from now on (NULL: without one); lora is not kept. On error nothing changes. */
cq_status cq_cpu_model_set_lora(cq_cpu_model *cm, const cq_lora *lora, cq_err *err);

cq_status cq_cpu_seq_new(cq_cpu_model *cm, int32_t max_tokens, cq_cpu_seq **out, cq_err *err);
void cq_cpu_seq_free(cq_cpu_seq *s);
/* Runs tokens[0..n) at positions pos .. pos+n-1 (pos = the tokens already in the cache). logits as in
 * cq_decoder_eval. The caller checks ids and bounds.
 *
 * Two precisions. Scoring (all_logits) and everything in an exact model (cq_decoder_options.exact, or
 * CLAUSEQA_CPU_EXACT=1 in the environment) run in float: weights dequantized exactly, products in float (the
 * reference for transformers and the CUDA path). A decode step (n == 1, last logits; or a prompt's last chunk of one
 * token) otherwise quantizes the activation vector of each matrix product to int16 per block of 32
 * (cq_quantize_i16) and multiplies the weights' integer quants by it in integers, with no float conversion of the
 * weights; each weight is still read once per step. Prompts (n > 1, last logits) take int16 activations in the o and
 * gate/up products and the last token's logits too where integer products are the faster ones
 * (cq_k_tokens_i16_fast: the AVX2 and AVX-512 kernels; forward_chunk says why not the other products), and run in
 * float on the plain C kernels. On the real model the logits stay within 4.5e-3 of the exact ones either way (over
 * all logits of the test prompts; tolerance 1e-2) and the greedy continuations are the same
 * (tests/unit/test_decoder_forward.c). */
cq_status cq_cpu_eval(cq_cpu_seq *s, const int32_t *tokens, size_t n, int32_t pos, float *logits, bool all_logits,
                      cq_err *err);
size_t cq_cpu_seq_kv_bytes(const cq_cpu_seq *s);
/* K and V rounded to bf16 as they are stored in the cache (kept in float: the values, not the memory, of a bf16 KV
 * cache; for measuring what bf16 costs the logits, tests/unit/test_decoder_kv_bf16.c). Off by default;
 * CLAUSEQA_KV_BF16=1 in the environment turns it on at cq_cpu_model_new. Sequences fed before keep what they hold. */
void cq_cpu_model_set_kv_bf16(cq_cpu_model *cm, bool on);

/* ---- ops (single-threaded C twins) ---------------------------------------------------------------------------- */

/* out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; out may be x */
void cq_op_rmsnorm(float *out, const float *x, const float *w, int n, float eps);
/* NeoX rotary embedding of one head in place: pairs (i, i + d/2), angle pos * freq_scale * base^(-2i/d) */
void cq_op_rope(float *x, int head_dim, int32_t pos, float base, float freq_scale);
/* out[i] = x[i] rounded to bf16 (nearest even) and back; out may be x */
void cq_op_round_bf16(float *out, const float *x, size_t n);
/* x (n floats) as `planes` (1 to 3) bf16 values each, out (planes, n) as floats: plane 0 = x rounded to bf16, plane p
 * = the rest rounded; the C twin of the CUDA batched step's to_planes_kernel (issue 31). Three planes sum to x exactly
 * ((p0 + p1) + p2, for |x| >= 2^-110 or 0: bf16's own subnormals end at 2^-133); two keep 16 bits (|x - p0 - p1| <=
 * 2^-17 |x|) */
void cq_op_bf16_planes(float *out, const float *x, size_t n, int planes);
/* gelu with the tanh approximation */
float cq_op_gelu_tanh(float x);
/* One query head against n_keys cached keys/values (rows of head_dim floats, stride kv_stride floats):
 * out = softmax(scale * q.k_j [soft-capped]) . v_j */
void cq_op_attention(const float *q, const float *k, const float *v, int n_keys, size_t kv_stride, int head_dim,
                     float scale, float softcap, float *scores, float *out);
/* A decode step's attention as the default mode runs it from 256 keys on (forward_cpu.c, decode_flash_task): n_head
 * queries q (n_head, hd) over n keys of a cache of n_head_kv heads (rows of n_head_kv * hd floats) in slots
 * [first, first + n1) then [0, n - n1), split into n_shares shares (online softmax each), merged into out
 * (n_head, hd). Serial, for tests; false when out of memory. */
bool cq_op_attention_shares(const float *q, int n_head, int n_head_kv, int hd, const float *k, const float *v,
                            int32_t first, int32_t n1, int32_t n, float scale, float softcap, int n_shares,
                            float *out);
/* y[t*ldy + r] = W[r] . x[t*ldx] for all rows, t < n_tokens: dequantize each row, sum in double. Obviously right and
 * slow: the reference the fast products (CPU tiles, cuBLAS) are tested against. */
void cq_op_matmul_ref(const cq_wmat *w, const float *x, size_t ldx, int n_tokens, float *y, size_t ldy);
/* out (rows, cols) = W + scale B A for an adapter's factors a (rank, cols) and b (rows, rank): W dequantized, each
 * delta summed in double. The reference that the CPU side product and CUDA's merge are tested against. */
void cq_op_lora_merge_ref(const cq_wmat *w, const float *a, const float *b, int rank, float scale, float *out);

#endif
