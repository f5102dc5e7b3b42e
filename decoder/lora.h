/* Internal: a LoRA adapter of the decoder (docs/ANSWERS.md, format clauseqa-lora-v1), read and checked against the
 * model it adapts. For each adapted projection p of layer l with weight W (out, in), the adapter holds A (r, in) and
 * B (out, r), and the adapted weight is W' = W + (alpha / r) B A. The factors are kept in float here; each backend
 * turns them into what it runs (forward_cpu.c: a low-rank side product y += s B (A x); forward_cuda.cu: merged into
 * its bf16 weights at load). */
#ifndef CQ_DECODER_LORA_H
#define CQ_DECODER_LORA_H

#include <stdbool.h>
#include <stdint.h>

#include "decoder/decoder.h"
#include "decoder/model.h"
#include "core/error.h"

/* The adaptable projections of a layer, in the order of cq_gemma_layer's matrices. */
typedef enum {
    CQ_PROJ_Q = 0,
    CQ_PROJ_K,
    CQ_PROJ_V,
    CQ_PROJ_O,
    CQ_PROJ_GATE,
    CQ_PROJ_UP,
    CQ_PROJ_DOWN,
    CQ_N_PROJ,
} cq_proj;

/* "attn_q" ... "ffn_down": the GGUF name of projection p (blk.{l}.{name}.weight). */
const char *cq_proj_name(cq_proj p);
/* The weight of projection p of layer L. */
const cq_wmat *cq_proj_weight(const cq_gemma_layer *L, cq_proj p);

typedef struct {
    float *a[CQ_N_PROJ]; /* (rank, in) or NULL: projection not adapted */
    float *b[CQ_N_PROJ]; /* (out, rank) */
} cq_lora_layer;

typedef struct {
    cq_adapter_info info;
    float scale;           /* alpha / rank */
    int32_t n_layer;
    cq_lora_layer *layers; /* (n_layer) */
} cq_lora;

/* Reads DIR/adapter.json and DIR/adapter.safetensors for model m. base_sha256 (hex), when given, must equal the
 * adapter's base.sha256. Errors say which file, tensor or field is wrong and how. */
cq_status cq_lora_load(const char *dir, const cq_gemma *m, const char *base_sha256, cq_lora **out, cq_err *err);
void cq_lora_free(cq_lora *l);

/* The SHA-256 (hex) of a model file, as an adapter's base.sha256 names it. Hashing the 253 MB model takes about a
 * second, so the digest is kept in PATH.sha256-cache ("<hex> <size> <mtime_ns>"), reused while the file's size and
 * modification time are the same; a cache that cannot be written only costs the next caller the hashing again. */
cq_status cq_model_file_sha256(const char *path, char out[65], cq_err *err);

#endif
