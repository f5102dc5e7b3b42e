/* Without CUDA in the build, the CUDA forward exists only to say so. */
#ifndef CLAUSEQA_HAVE_CUDA
#include "decoder/forward_cuda.h"

#define NO_CUDA(err) cq_err_set(err, CQ_ERR_UNSUPPORTED, "this build of clauseqa has no CUDA")

bool cq_cuda_available(void) { return false; }
cq_status cq_cuda_model_new(const cq_gemma *m, cq_cuda_model **out, cq_err *err) {
    (void)m;
    *out = NULL;
    return NO_CUDA(err);
}
void cq_cuda_model_free(cq_cuda_model *cm) { (void)cm; }
cq_status cq_cuda_model_set_lora(cq_cuda_model *cm, const cq_lora *lora, cq_err *err) {
    (void)cm, (void)lora;
    return NO_CUDA(err);
}
cq_status cq_cuda_model_set_kv_bf16(cq_cuda_model *cm, bool on, cq_err *err) {
    (void)cm, (void)on;
    return NO_CUDA(err);
}
cq_status cq_cuda_seq_new(cq_cuda_model *cm, int32_t max_tokens, cq_cuda_seq **out, cq_err *err) {
    (void)cm, (void)max_tokens;
    *out = NULL;
    return NO_CUDA(err);
}
void cq_cuda_seq_free(cq_cuda_seq *s) { (void)s; }
cq_status cq_cuda_seq_new_packed(cq_cuda_model *cm, int32_t max_tokens, cq_cuda_seq **out, cq_err *err) {
    (void)cm, (void)max_tokens;
    *out = NULL;
    return NO_CUDA(err);
}
cq_status cq_cuda_score_packed(cq_cuda_seq *s, const int32_t *tokens, const int32_t *starts, size_t n,
                               const int32_t *ids, int n_ids, int32_t min_share, int64_t *shared, float *out,
                               cq_err *err) {
    (void)s, (void)tokens, (void)starts, (void)n, (void)ids, (void)n_ids, (void)min_share, (void)shared, (void)out;
    return NO_CUDA(err);
}
cq_status cq_cuda_eval(cq_cuda_seq *s, const int32_t *tokens, size_t n, int32_t pos, float *logits, bool all_logits,
                       cq_err *err) {
    (void)s, (void)tokens, (void)n, (void)pos, (void)logits, (void)all_logits;
    return NO_CUDA(err);
}
cq_status cq_cuda_decode_greedy(cq_cuda_seq *s, int32_t token, int32_t pos, int32_t *next, cq_err *err) {
    (void)s, (void)token, (void)pos, (void)next;
    return NO_CUDA(err);
}
cq_status cq_cuda_eval_top(cq_cuda_seq *s, const int32_t *tokens, size_t n, int32_t pos, const cq_top_request *req,
                           cq_top *out, cq_err *err) {
    (void)s, (void)tokens, (void)n, (void)pos, (void)req, (void)out;
    return NO_CUDA(err);
}
cq_status cq_cuda_decode_batch(cq_cuda_seq *const *seqs, const int32_t *tokens, const int32_t *pos, int B,
                               const cq_top_request *req, cq_top *out, cq_err *err) {
    (void)seqs, (void)tokens, (void)pos, (void)B, (void)req, (void)out;
    return NO_CUDA(err);
}
cq_status cq_cuda_forward_rows(cq_cuda_seq *const *seqs, const int32_t *tokens, const int32_t *pos, int R,
                               const int32_t *out_rows, int n_out, const cq_top_request *req, cq_top *out, cq_err *err) {
    (void)seqs, (void)tokens, (void)pos, (void)R, (void)out_rows, (void)n_out, (void)req, (void)out;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_top(const float *logits, int rows, int n_vocab, const cq_top_request *req, cq_top *out,
                         cq_err *err) {
    (void)logits, (void)rows, (void)n_vocab, (void)req, (void)out;
    return NO_CUDA(err);
}
size_t cq_cuda_seq_kv_bytes(const cq_cuda_seq *s) {
    (void)s;
    return 0;
}
cq_status cq_cuda_copy_bandwidth(size_t bytes, double *gb_per_s, cq_err *err) {
    (void)bytes, (void)gb_per_s;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_rmsnorm(float *out, const float *x, const float *w, int rows, int n, float eps, cq_err *err) {
    (void)out, (void)x, (void)w, (void)rows, (void)n, (void)eps;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_bias_rope(float *x, int rows, int head_dim, const int32_t *pos, const float *bias, float base,
                               cq_err *err) {
    (void)x, (void)rows, (void)head_dim, (void)pos, (void)bias, (void)base;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_rope(float *x, int rows, int head_dim, const int32_t *pos, float base, float freq_scale,
                          cq_err *err) {
    (void)x, (void)rows, (void)head_dim, (void)pos, (void)base, (void)freq_scale;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_geglu(float *y, const float *u, int n, cq_err *err) {
    (void)y, (void)u, (void)n;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_swiglu(float *y, const float *u, int n, cq_err *err) {
    (void)y, (void)u, (void)n;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_attention(const float *q, const float *k, const float *v, int n_q, int n_keys, int head_dim,
                               int window, float scale, float softcap, bool kv_bf16, float *out, cq_err *err) {
    (void)kv_bf16;
    (void)q, (void)k, (void)v, (void)n_q, (void)n_keys, (void)head_dim, (void)window, (void)scale, (void)softcap;
    (void)out;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_decode_attention(const float *q, int n_head, const float *k, const float *v, int n_keys,
                                      int head_dim, int window, float scale, float softcap, bool kv_bf16, float *out,
                                      cq_err *err) {
    (void)kv_bf16;
    (void)q, (void)n_head, (void)k, (void)v, (void)n_keys, (void)head_dim, (void)window, (void)scale, (void)softcap;
    (void)out;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_logits(const cq_gemma *m, const float *x, float *y, cq_err *err) {
    (void)m, (void)x, (void)y;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_logits_rows(const cq_gemma *m, const float *x, int n, float *y, cq_err *err) {
    (void)m, (void)x, (void)n, (void)y;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_logits_gemm(const cq_gemma *m, const float *x, int n, int planes, float *y, cq_err *err) {
    (void)m, (void)x, (void)n, (void)planes, (void)y;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_matmul(const cq_wmat *w, const float *x, int n_tokens, float *y, cq_err *err) {
    (void)w, (void)x, (void)n_tokens, (void)y;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_matmul_planes(const cq_wmat *w, const float *x, int n_tokens, int planes, float *y, cq_err *err) {
    (void)w, (void)x, (void)n_tokens, (void)planes, (void)y;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_geglu_planes(float *y, const float *yp, const float *up, int n, int planes, cq_err *err) {
    (void)y, (void)yp, (void)up, (void)n, (void)planes;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_addnorm_planes(float *x, float *xn, const float *o, const float *w_post, const float *w_next,
                                    int rows, int n, float eps, int planes, cq_err *err) {
    (void)x, (void)xn, (void)o, (void)w_post, (void)w_next, (void)rows, (void)n, (void)eps, (void)planes;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_qk_store_planes(const float *q, const float *k, const float *v, int rows, int head_dim,
                                     int32_t pos0, float base, int planes, float *q_out, float *k_out, float *v_out,
                                     cq_err *err) {
    (void)q, (void)k, (void)v, (void)rows, (void)head_dim, (void)pos0, (void)base, (void)planes;
    (void)q_out, (void)k_out, (void)v_out;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_attention_packed(const float *q, const float *k, const float *v, const int32_t *starts,
                                      int n_prompts, int n_q, int head_dim, int window, float scale, float softcap,
                                      bool gemm_path, bool kv_bf16, const int32_t *pre_len, float *out, cq_err *err) {
    (void)kv_bf16, (void)pre_len;
    (void)q, (void)k, (void)v, (void)starts, (void)n_prompts, (void)n_q, (void)head_dim, (void)window, (void)scale;
    (void)softcap, (void)gemm_path, (void)out;
    return NO_CUDA(err);
}
cq_status cq_cuda_op_lora_merge(const cq_wmat *w, const float *a, const float *b, int rank, float scale, float *out,
                                cq_err *err) {
    (void)w, (void)a, (void)b, (void)rank, (void)scale, (void)out;
    return NO_CUDA(err);
}
#else
typedef int cq_forward_cuda_stub_unused; /* ISO C wants a translation unit to declare something */
#endif
