/* Internals shared by the ssm/ files (not part of the public API): the model's tensors, the state's layout, and
 * the contract every backend implements for one block of tokens. */
#ifndef CQ_SSM_INTERNAL_H
#define CQ_SSM_INTERNAL_H

#include <math.h>

#include "ssm/ssm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One direction of one layer's mixer (Mamba block). R = dt_rank, N = d_state, K = d_conv, Di = d_inner. */
typedef struct {
    const float *in_proj;  /* (2*Di, d_model)  rows 0..Di-1 give x, rows Di..2Di-1 give z */
    const float *conv_w;   /* (Di, K)          xc[t,c] = b[c] + sum_j w[c,j] * x[t-K+1+j, c] */
    const float *conv_b;   /* (Di) */
    const float *x_proj;   /* (R + 2N, Di)     rows: dt_low (R), B (N), C (N) */
    const float *dt_proj;  /* (Di, R) */
    const float *dt_bias;  /* (Di) */
    const float *A_log;    /* (Di, N)          A = -exp(A_log) */
    const float *D;        /* (Di) */
    const float *out_proj; /* (d_model, Di) */
} cq_ssm_mixer_w;

typedef struct {
    const float *norm;  /* (d_model) RMSNorm weight */
    cq_ssm_mixer_w fwd; /* the forward (causal, stateful) scan */
    cq_ssm_mixer_w rev; /* the clause-local reversed scan; all NULL unless bidirectional */
} cq_ssm_layer_w;

struct cq_ssm_model {
    cq_ssm_config cfg;
    int d_inner;
    uint32_t fingerprint;   /* of the shape: states carry it so that a foreign state is refused */
    char id[65];            /* SHA-256 of ssm.safetensors */
    const float *embedding; /* (vocab_size, d_model); NULL with an external vocabulary */
    const cq_ssm_vocab *vocab; /* the external vocabulary, or NULL */
    const float *markers;   /* external vocabulary: (5, d_model) rows of ids 0..4 */
    const float *embd_proj; /* external vocabulary: (d_model, token_embd_dim) */
    void *row_cache;        /* external vocabulary: projected rows, filled on first use (ssm/input.c) */
    cq_ssm_layer_w *layers; /* n_layer */
    const float *norm_f;    /* (d_model) */
    const float *pool_w;    /* (d_embed, 2*d_model)  columns 0..d_model-1 take the mean, the rest the last */
    const float *pool_b;    /* (d_embed) */
    float *arena;           /* every tensor above, as F32 */
    /* document head (doc_head.safetensors; docs/SSM.md "Document vectors"), or doc_w NULL and doc_window 0 */
    const float *doc_w;     /* (d_embed, 2*d_model)  columns 0..d_model-1 take the mean, the rest the last */
    const float *doc_b;     /* (d_embed) */
    int doc_window;         /* tokens of the document's start read */
    char doc_id[65];        /* SHA-256 of doc_head.safetensors followed by ":<window>" */
    float *doc_arena;
};

/* conv holds the last K-1 inputs of each layer's conv, oldest first; h the scan state. Both start at zero. */
struct cq_ssm_state {
    uint32_t fingerprint;
    int n_layer, d_inner, d_state, d_conv;
    int64_t n_tokens;
    float *conv; /* (n_layer, Di, K-1) */
    float *h;    /* (n_layer, Di, N) */
};

/* One block: T tokens of n_seq independent sequences laid end to end. Each sequence starts from its state (or from
 * zero when states[i] is NULL) and leaves its final state there. Pieces partition the block (each lies inside one
 * sequence): they are the clause segments cut by the block's edges, the unit of pooling and, when bidirectional,
 * of the reversed scan. For each piece the backend writes
 *     pool_mean[p] = W_mean · sum_{t in p} o_t        pool_last[p] = W_last · o_{end-1}        (d_embed each)
 * where o is the final normalized output, and W_mean, W_last the two halves of pool_w; the driver finishes
 * v = normalize((sum of pool_mean over a segment's pieces) / n + pool_last of its last piece + pool_b). */
typedef struct {
    const int32_t *tokens;
    size_t n_tokens;
    size_t n_seq;
    const size_t *seq_off; /* n_seq + 1 */
    cq_ssm_state *const *states;
    size_t n_pieces;
    const size_t *piece_off; /* n_pieces + 1 */
    float *pool_mean;        /* n_pieces × d_embed */
    float *pool_last;        /* n_pieces × d_embed */
    float *outputs;          /* optional: T × d_model */
    float *piece_sum;        /* optional (document vectors): n_pieces × d_model, sum_{t in p} o_t */
    float *piece_last;       /* optional, with piece_sum: n_pieces × d_model, o_{end-1} */
} cq_ssm_block;

/* The network's input rows x0 (n × d_model) of tokens: the embedding table's rows, or with an external vocabulary
 * the markers' rows and the projected table rows (computed once per id and kept; safe from several threads). */
cq_status cq_ssm_embed(const cq_ssm_model *m, const int32_t *tokens, size_t n, float *x, cq_err *err);
cq_status cq_ssm_row_cache_new(cq_ssm_model *m, cq_err *err); /* at load: one empty slot per id */
void cq_ssm_row_cache_free(cq_ssm_model *m);

cq_status cq_ssm_ref_forward(const cq_ssm_model *m, const cq_ssm_block *b, cq_err *err);

typedef struct cq_ssm_cpu cq_ssm_cpu;
cq_status cq_ssm_cpu_new(const cq_ssm_model *m, int n_threads, cq_ssm_cpu **out, cq_err *err);
void cq_ssm_cpu_free(cq_ssm_cpu *c);
cq_status cq_ssm_cpu_forward(cq_ssm_cpu *c, const cq_ssm_block *b, cq_err *err);

typedef struct cq_ssm_cuda cq_ssm_cuda;
cq_status cq_ssm_cuda_new(const cq_ssm_model *m, cq_ssm_cuda **out, cq_err *err);
void cq_ssm_cuda_free(cq_ssm_cuda *c);
cq_status cq_ssm_cuda_forward(cq_ssm_cuda *c, const cq_ssm_block *b, cq_err *err);
size_t cq_ssm_cuda_block_tokens(const cq_ssm_cuda *c);
/* bench_ssm only: the scan passes alone and a device copy, timed (ssm_cuda.cu) */
cq_status cq_ssm_cuda_bench_scan(cq_ssm_cuda *c, size_t T, double *scan_ms, double *scan_gbps, double *copy_gbps,
                                 cq_err *err);
cq_ssm_cuda *cq_ssm_encoder_cuda(cq_ssm_encoder *e); /* NULL unless the CUDA backend */

/* Scalar helpers every backend agrees on (torch's definitions). */
static inline float cq_ssm_silu(float x) { return x / (1.0f + expf(-x)); }
static inline float cq_ssm_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

#ifdef __cplusplus
}
#endif

#endif
