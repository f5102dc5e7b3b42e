/* Internal: hyper-parameters and weights of a decoder as read from a GGUF file (Gemma 3 or Qwen2: the
 * architecture comes from general.architecture), shared by the CPU and CUDA forwards. Weight matrices point into
 * the GGUF mapping (quantized as stored); norm vectors and biases are converted to float here. The struct keeps
 * its first architecture's name; a Qwen2 model is the same layout with what it lacks left NULL (decoder.h). */
#ifndef CQ_DECODER_MODEL_H
#define CQ_DECODER_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decoder/gguf.h"
#include "core/error.h"

/* A matrix W (rows, cols) stored row-major as GGUF ne = {cols, rows}: y = W x reads row r at data + r*row_bytes. */
typedef struct {
    const void *data;
    uint32_t type;    /* cq_qtype */
    int64_t rows, cols;
    size_t row_bytes;
} cq_wmat;

typedef struct {
    cq_wmat wq;    /* (n_head*head_dim, n_embd) */
    cq_wmat wk;    /* (n_head_kv*head_dim, n_embd) */
    cq_wmat wv;    /* (n_head_kv*head_dim_v, n_embd) */
    cq_wmat wo;    /* (n_embd, n_head*head_dim_v) */
    cq_wmat wgate; /* (n_ff, n_embd) */
    cq_wmat wup;   /* (n_ff, n_embd) */
    cq_wmat wdown; /* (n_embd, n_ff) */
    float *attn_norm;      /* (n_embd) pre-attention RMSNorm weight (GGUF stores Gemma's 1 + w) */
    float *q_norm;         /* (head_dim); NULL: no QK-norm (qwen2) */
    float *k_norm;         /* (head_dim); NULL with q_norm */
    float *post_attn_norm; /* (n_embd); NULL: no sandwich norms (qwen2) */
    float *ffn_norm;       /* (n_embd) */
    float *post_ffw_norm;  /* (n_embd); NULL with post_attn_norm */
    float *bq, *bk, *bv;   /* (q_dim), (kv_dim), (kv_dim) projection biases (qwen2), or NULL */
    bool global;           /* full attention; otherwise sliding window */
    float rope_base;       /* 10k local, rope.freq_base global */
    float rope_freq_scale; /* angle multiplier: 1 / linear scaling factor (global layers only) */
} cq_gemma_layer;

typedef enum {
    CQ_ARCH_GEMMA3 = 0,
    CQ_ARCH_QWEN2 = 1,
} cq_arch;

typedef struct {
    cq_arch arch;
    char arch_name[32];   /* general.architecture: "gemma3", "qwen2" */
    char name[128];
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, head_dim_v, n_ff;
    int32_t context_length, window;
    float rms_eps;
    float attn_scale;     /* scores = q.k * attn_scale */
    float embed_scale;    /* sqrt(n_embd) (gemma3); 1 (qwen2) */
    bool ffn_silu;        /* FFN gate activation: silu (SwiGLU, qwen2); else gelu_tanh (GeGLU, gemma3) */
    float final_softcap;  /* 0: none; else logits = c * tanh(logits / c) */
    float attn_softcap;   /* 0: none; else scores = c * tanh(scores / c) */
    cq_wmat token_embd;   /* (n_vocab, n_embd) */
    cq_wmat output;       /* (n_vocab, n_embd): token_embd when tied */
    float *output_norm;   /* (n_embd) */
    cq_gemma_layer *layers;
    int32_t n_global;
    const void *file_map; /* the GGUF's read-only file mapping the weights point into (cq_gguf_file_map), or NULL */
    size_t file_map_bytes;
} cq_gemma;

/* Reads and checks every hyper-parameter and tensor shape; a Gemma-3 or Qwen2 file of any size loads. */
cq_status cq_gemma_load(const cq_gguf *g, cq_gemma *m, cq_err *err);
void cq_gemma_free(cq_gemma *m);

#endif
