/* Internal: the CUDA forward of Gemma 3. Weights are dequantized once to bf16 on the GPU; activations, norms and
 * the KV cache stay float32.
 * Prefill (chunks of up to CQ_CUDA_BATCH tokens): cuBLAS bf16 x bf16 -> f32 GEMMs for the products; own kernels
 * for the embedding gather, RMSNorm, the residual add fused with the next norm, fused QK-norm + RoPE + KV store;
 * attention as two float32 cuBLAS GEMMs around a masked softmax (an online-softmax kernel beyond
 * ATT_GEMM_MAX_KEYS key slots); full chunks replayed as CUDA graphs.
 * Decode (one token): five own kernels a layer that read each weight once (q/k/v in one launch; attention with
 * QK-norm, RoPE and the KV store fused, split over the key range so one KV head still fills the GPU, the splits
 * merged by the last block; o; gate/up with GeGLU; down), the residual add and next RMSNorm in each product's
 * prologue; launched with programmatic dependent launch and replayed as a CUDA graph; greedy steps take the
 * argmax on the GPU, candidate steps (cq_cuda_eval_top) their top logits. Steps of several sequences at once run as
 * one batched forward (cq_cuda_decode_batch).
 * Every kernel has its C twin in forward_cpu.h (cq_op_*), and tests/unit/test_decoder_cuda.c compares them.
 * Without CUDA in the build, every function here returns CQ_ERR_UNSUPPORTED. */
#ifndef CQ_DECODER_FORWARD_CUDA_H
#define CQ_DECODER_FORWARD_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decoder/lora.h"
#include "decoder/model.h"
#include "decoder/top.h"
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
/* Merges adapter lora into the weights (W' = bf16(W + s B A), the delta added in float to the dequantized W), or
 * restores the file's weights (NULL); lora is not kept. A failure (CQ_ERR_DEVICE) may leave weights half merged. */
cq_status cq_cuda_model_set_lora(cq_cuda_model *cm, const cq_lora *lora, cq_err *err);
/* The KV cache of sequences made from now on in bf16 (on) or float (off): K and V rounded to nearest even as they are
 * stored, half the memory and half the bytes attention reads; every kernel that touches the cache (prefill chunks,
 * packed prompts, decode and batched steps) reads it as such (the prefill's SGEMMs through a float copy of the key
 * slots they use). Sequences made before keep theirs; batched steps and forwards of rows refuse a sequence whose type
 * is not the model's current one. CLAUSEQA_KV_BF16=1 in the environment turns it on at cq_cuda_model_new (off by
 * default until measured on a GPU; the CPU twin: cq_cpu_model_set_kv_bf16). CQ_ERR_DEVICE when the scratch cannot be
 * allocated (nothing changed then). */
cq_status cq_cuda_model_set_kv_bf16(cq_cuda_model *cm, bool on, cq_err *err);
cq_status cq_cuda_seq_new(cq_cuda_model *cm, int32_t max_tokens, cq_cuda_seq **out, cq_err *err);
void cq_cuda_seq_free(cq_cuda_seq *s);
/* As cq_cpu_eval: tokens at positions pos.., logits to host memory. */
cq_status cq_cuda_eval(cq_cuda_seq *s, const int32_t *tokens, size_t n, int32_t pos, float *logits, bool all_logits,
                       cq_err *err);

/* Packed prompts: n independent prompts laid end to end (tokens[starts[i] .. starts[i+1])) run as one stream of
 * prefill chunks, each token rotated at its position in its prompt and attending only to its own prompt's earlier
 * tokens (a block-diagonal causal mask, the window too); out[i * n_ids + k] = logit of ids[k] at prompt i's last
 * token. s from cq_cuda_seq_new_packed (every layer's cache flat), starts[n] <= its max_tokens, n_ids at most
 * CQ_CUDA_SCORE_MAX_IDS. Graphs are not captured (the chunk shapes change with every call).
 * Prefix reuse (min_share > 0): the prompts run in token order, and a prompt whose first c >= min_share tokens are
 * those of the last prompt stored whole (the instruction, a passage shared by several asks) is stored from token c
 * on, its tokens reading that prompt's K/V rows for positions [0, c) (its own rows after them, positions unchanged):
 * those c tokens are not run again. Logits equal the full prompt's up to the GEMMs' shapes (test_decoder_cuda).
 * *shared (may be NULL): the tokens not run. min_share 0: every prompt whole, in the caller's order. */
#define CQ_CUDA_SCORE_MAX_IDS 8
#define CQ_CUDA_SHARE_MIN 16
cq_status cq_cuda_seq_new_packed(cq_cuda_model *cm, int32_t max_tokens, cq_cuda_seq **out, cq_err *err);
cq_status cq_cuda_score_packed(cq_cuda_seq *s, const int32_t *tokens, const int32_t *starts, size_t n,
                               const int32_t *ids, int n_ids, int32_t min_share, int64_t *shared, float *out,
                               cq_err *err);

/* One greedy decode step: token at pos in, the argmax of the next token's logits out (computed on the GPU, so the
 * logits never leave it). */
cq_status cq_cuda_decode_greedy(cq_cuda_seq *s, int32_t token, int32_t pos, int32_t *next, cq_err *err);
/* Feeds n tokens at pos.. and returns the candidates of the next one (decoder/top.h), computed on the GPU from
 * the last token's logits (two kernels: per-segment top keys and sums, then a merge per row), so that only they
 * are copied back. One token is a decode step (its own graph), more a prefill. */
cq_status cq_cuda_eval_top(cq_cuda_seq *s, const int32_t *tokens, size_t n, int32_t pos, const cq_top_request *req,
                           cq_top *out, cq_err *err);
/* One decode step of B different sequences of one model as one batched forward: token i at pos[i] of seqs[i], its
 * candidates to out[i] as req[i] asks. The products are cuBLAS GEMMs of B rows (bf16 inputs, as prefill), QK-norm +
 * RoPE + KV store and attention one launch each over every row's own cache, then the logits and candidates of the B
 * rows; a CUDA graph per B. B == 1 is cq_cuda_eval_top's decode step (its own kernels, float inputs). */
#define CQ_CUDA_DECODE_BATCH_MAX 64
cq_status cq_cuda_decode_batch(cq_cuda_seq *const *seqs, const int32_t *tokens, const int32_t *pos, int B,
                               const cq_top_request *req, cq_top *out, cq_err *err);
/* One forward of R rows of several sequences: row t is tokens[t] at position pos[t] of seqs[t]. A sequence's rows
 * are consecutive, at consecutive positions (a chunk of its prompt, or one decode step), at most CQ_CUDA_BATCH of
 * them (R <= CQ_CUDA_ROWS_MAX); each row sees its own sequence's keys up to itself, those of its earlier rows in
 * this forward included. The candidates of rows out_rows[0..n_out) (n_out <= CQ_CUDA_DECODE_BATCH_MAX; a prompt's
 * last row, a step's row; none when the forward only feeds a prompt's first part), as req[i] asks, go to out[i]. What the decoder's batcher runs when prefills of several
 * asks (and their decode steps) meet: the batched step's kernels and cuBLAS GEMMs of R rows, no graph. */
#define CQ_CUDA_ROWS_MAX CQ_CUDA_BATCH
cq_status cq_cuda_forward_rows(cq_cuda_seq *const *seqs, const int32_t *tokens, const int32_t *pos, int R,
                               const int32_t *out_rows, int n_out, const cq_top_request *req, cq_top *out, cq_err *err);
/* Bytes of the sequence's KV cache on the GPU (allocated in full at cq_cuda_seq_new; bf16 or float). */
size_t cq_cuda_seq_kv_bytes(const cq_cuda_seq *s);
/* Device-to-device cudaMemcpy bandwidth over two buffers of `bytes`, counting bytes read plus bytes written. */
cq_status cq_cuda_copy_bandwidth(size_t bytes, double *gb_per_s, cq_err *err);

/* ---- single kernels on host data, for the kernel tests (each copies in, runs, copies out) -------------------- */

cq_status cq_cuda_op_rmsnorm(float *out, const float *x, const float *w, int rows, int n, float eps, cq_err *err);
/* rows heads of head_dim each; row r rotates at position pos[r] */
cq_status cq_cuda_op_rope(float *x, int rows, int head_dim, const int32_t *pos, float base, float freq_scale,
                          cq_err *err);
/* qwen2: rows heads, row r plus bias row r, then RoPE at pos[r] (base, no scaling), no QK-norm */
cq_status cq_cuda_op_bias_rope(float *x, int rows, int head_dim, const int32_t *pos, const float *bias, float base,
                               cq_err *err);
cq_status cq_cuda_op_geglu(float *y, const float *u, int n, cq_err *err);
cq_status cq_cuda_op_swiglu(float *y, const float *u, int n, cq_err *err); /* y = silu(y) * u (qwen2) */
/* n_q queries (head_dim each) against n_keys keys/values (row stride head_dim); query i sees keys
 * [lo_i, hi_i) with lo_i = max(0, hi_i - window) (window 0: all), hi_i = n_keys - n_q + i + 1 (causal). kv_bf16 (here
 * and below): the keys and values go to the device as a bf16 cache holds them (rounded, cq_op_round_bf16) and the
 * kernels' bf16 instances read them. */
cq_status cq_cuda_op_attention(const float *q, const float *k, const float *v, int n_q, int n_keys, int head_dim,
                               int window, float scale, float softcap, bool kv_bf16, float *out, cq_err *err);
/* A decode step's fused attention: n_head query heads q sharing one KV head; the token at position n_keys - 1
 * brings key and value row n_keys - 1 of k and v (the earlier rows are the cache). q and that key are
 * RMS-normalized (unit weight, eps 1e-6) and rotated at angle 0 (the identity) in the kernel; window as above. */
cq_status cq_cuda_op_decode_attention(const float *q, int n_head, const float *k, const float *v, int n_keys,
                                      int head_dim, int window, float scale, float softcap, bool kv_bf16, float *out,
                                      cq_err *err);
/* Packed prompts' attention (cq_cuda_score_packed): keys and values of n = starts[n_prompts] tokens, prompt i the
 * rows [starts[i], starts[i+1]); queries the last n_q rows (one chunk), each seeing the keys of its own prompt up to
 * itself (and within the window). gemm_path: the cuBLAS path (keys from the chunk's earliest key), else the
 * online-softmax kernels. pre_len (NULL: none): prompt i > 0 with pre_len[i] = c > 0 shares its first c positions
 * with the nearest earlier prompt whose pre_len is 0 (its leader, c at most that prompt's length): its rows hold its
 * positions c.. only, and its queries read the leader's first c rows for positions [0, c) (prefix reuse). */
cq_status cq_cuda_op_attention_packed(const float *q, const float *k, const float *v, const int32_t *starts,
                                      int n_prompts, int n_q, int head_dim, int window, float scale, float softcap,
                                      bool gemm_path, bool kv_bf16, const int32_t *pre_len, float *out, cq_err *err);
/* An adapter's merge as cq_cuda_model_set_lora does it: out (rows, cols) = bf16(W + scale B A), as floats. */
cq_status cq_cuda_op_lora_merge(const cq_wmat *w, const float *a, const float *b, int rank, float scale, float *out,
                                cq_err *err);
/* One token's logits (n_vocab) from x (n_embd, final-normed) through the decode step's logits kernel: Q8_0 weights
 * as in the file when the embedding is Q8_0 (exact float products), else bf16; soft-capped as the model says. */
cq_status cq_cuda_op_logits(const cq_gemma *m, const float *x, float *y, cq_err *err);
/* n rows of x (n, n_embd) through the batched steps' logits kernel (y (n, n_vocab)): each row as cq_cuda_op_logits
 * computes it (the same weights, float products), up to the summation order. */
cq_status cq_cuda_op_logits_rows(const cq_gemma *m, const float *x, int n, float *y, cq_err *err);
/* The same through the batched steps' default logits, the cuBLAS GEMM on the output matrix's bf16 copy, the states
 * in planes (1 to 3) bf16 planes (3: exactly; 1: rounded to bf16), soft-capped as the model says (issue 31). */
cq_status cq_cuda_op_logits_gemm(const cq_gemma *m, const float *x, int n, int planes, float *y, cq_err *err);
/* The candidates of rows rows of n_vocab logits each, through the kernels cq_cuda_eval_top uses. */
cq_status cq_cuda_op_top(const float *logits, int rows, int n_vocab, const cq_top_request *req, cq_top *out,
                         cq_err *err);
/* y (n_tokens, rows) = x W^T with W converted to bf16, f32 accumulation: one token through the decode kernel (x in
 * float), more through cuBLAS (x rounded to bf16). */
cq_status cq_cuda_op_matmul(const cq_wmat *w, const float *x, int n_tokens, float *y, cq_err *err);
/* The same through the batched step's products (issue 31): x cut into planes (1 to 3) bf16 planes, one cuBLAS GEMM
 * over planes x n_tokens rows, the planes' products summed in the consumer kernels' order. planes 3 holds x
 * exactly: the float-input product with bf16 weights (the decode kernel's) up to the summation order; planes 1 is
 * cq_cuda_op_matmul's cuBLAS path (x rounded to bf16). */
cq_status cq_cuda_op_matmul_planes(const cq_wmat *w, const float *x, int n_tokens, int planes, float *y, cq_err *err);
/* The kernels that read those planes' products, summing them as they read (issue 31), against C twins on the summed
 * planes: y = gelu_tanh(yp summed) * (up summed), yp and up (planes, n); the residual step x += RMSNorm(o summed) *
 * w_post, xn = RMSNorm(x) * w_next, o (planes, rows, n); QK-norm (unit weights) + RoPE (base, positions pos0 +
 * t) of rows tokens with one query and one key head each, q, k, v (planes, rows, head_dim): the rotated query to
 * q_out, the key and the value as the cache stores them to k_out, v_out (rows, head_dim). */
cq_status cq_cuda_op_geglu_planes(float *y, const float *yp, const float *up, int n, int planes, cq_err *err);
cq_status cq_cuda_op_addnorm_planes(float *x, float *xn, const float *o, const float *w_post, const float *w_next,
                                    int rows, int n, float eps, int planes, cq_err *err);
cq_status cq_cuda_op_qk_store_planes(const float *q, const float *k, const float *v, int rows, int head_dim,
                                     int32_t pos0, float base, int planes, float *q_out, float *k_out, float *v_out,
                                     cq_err *err);

#ifdef __cplusplus
}
#endif

#endif
