/* The clause encoder: a Mamba-style selective state-space network (docs/SSM.md).
 *
 * One pass over a document reads its clauses in order and yields one unit-length vector per clause, pooled at the
 * clause's end from the clause's own outputs and the running state, plus the document's final state. A state can
 * be saved and resumed: encoding A then B from A's state gives what encoding A+B gives. Queries run through the
 * same network from a zero state.
 *
 *   cq_ssm_model    weights + config, immutable after load; share one between encoders and threads.
 *   cq_ssm_encoder  a backend (CPU reference, fast CPU, CUDA) with its scratch; one call at a time.
 *   cq_ssm_state    one document's running state (conv window + scan state per layer, tokens read so far).
 *
 * Weights live in a directory holding `ssm.json` (the config) and `ssm.safetensors`; the loader names what is
 * wrong with either. Nothing here downloads anything. The input layer is either built in (tokenizer cq-hash-v1 and
 * its own embedding table) or an external vocabulary the caller lends (cq_ssm_vocab: the decoder's tokenizer and
 * token-embedding table, projected to d_model; ssm/ never reads the decoder's files itself). */
#ifndef CQ_SSM_SSM_H
#define CQ_SSM_SSM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct cq_ssm_model cq_ssm_model;
typedef struct cq_ssm_encoder cq_ssm_encoder;
typedef struct cq_ssm_state cq_ssm_state;

typedef struct {
    int vocab_size;     /* 32768 for tokenizer "cq-hash-v1"; the external vocabulary's size otherwise */
    int d_model;        /* residual width */
    int n_layer;
    int d_state;        /* N: scan state per channel */
    int d_conv;         /* causal depthwise conv width */
    int expand;         /* d_inner = expand * d_model */
    int dt_rank;        /* R: rank of the Δ projection */
    int d_embed;        /* clause/query vector size */
    bool bidirectional; /* add a clause-local reversed scan (docs/SSM.md) */
    float norm_eps;     /* RMSNorm epsilon */
    char tokenizer[16]; /* "cq-hash-v1" (built in) or the name of an external vocabulary ("gemma3") */
    int token_embd_dim; /* external vocabulary: its table's width (0 with the built-in table) */
} cq_ssm_config;

/* ---- external input vocabulary (docs/SSM.md, "Input layer") ----
 * Ids 0..4 are the encoder's own markers (PAD, UNK, BOS, SEP, QRY, rows `embedding.markers` of the weights); every
 * other id reads the lent table's row projected by `embedding.proj.weight` (d_model × n_embd). tokenize must never
 * return an id below 5 for text (Gemma's are control tokens; an adapter maps any to 1, UNK). The callbacks may be
 * called from several threads at once; the vocabulary must outlive every model loaded with it. */
typedef struct {
    const char *name;     /* must equal the config's "tokenizer" */
    int32_t n_vocab;      /* must equal the config's "vocab_size" */
    int32_t n_embd;       /* must equal the config's "token_embd_dim" */
    const char *table_id; /* the table's fingerprint; must equal the config's "token_table_id" */
    void *ctx;
    /* text -> *ids (malloc'd, the caller frees), *n ids; no marker tokens */
    cq_status (*tokenize)(void *ctx, const char *text, size_t len, int32_t **ids, size_t *n, cq_err *err);
    /* the table row of id, n_embd floats */
    void (*row)(void *ctx, int32_t id, float *out);
} cq_ssm_vocab;

/* ---- model ---- */

/* Loads DIR/ssm.json and DIR/ssm.safetensors (F32, F16 or BF16 tensors; kept as F32). Weights whose config names
 * an external tokenizer need cq_ssm_model_load_vocab. */
cq_status cq_ssm_model_load(const char *dir, cq_ssm_model **out, cq_err *err);
/* The same with the external vocabulary the config names (NULL: the built-in tokenizer only). The model's id
 * then covers the table too (SHA-256 of ssm.safetensors followed by the table's fingerprint). */
cq_status cq_ssm_model_load_vocab(const char *dir, const cq_ssm_vocab *vocab, cq_ssm_model **out, cq_err *err);
/* The "tokenizer" the weights in DIR were trained with (reads ssm.json only): "cq-hash-v1" or an external
 * vocabulary's name, which the caller must then lend. */
cq_status cq_ssm_model_tokenizer(const char *dir, char *name, size_t cap, cq_err *err);
void cq_ssm_model_free(cq_ssm_model *m);
const cq_ssm_config *cq_ssm_model_config(const cq_ssm_model *m);
/* The weights' identity: the SHA-256 (hex) of ssm.safetensors. Stored vectors and states name it. */
const char *cq_ssm_model_id(const cq_ssm_model *m);
/* The document head (docs/SSM.md, "Document vectors"; issue 27), loaded with the weights when DIR holds
 * doc_head.safetensors: the tokens of a document's start it reads (ssm.json "manifest"."doc_head"."window_tokens"),
 * 0 when the weights have no head; and its identity (SHA-256 of doc_head.safetensors and the window, "" without),
 * which stored document vectors name. */
int cq_ssm_model_doc_window(const cq_ssm_model *m);
const char *cq_ssm_model_doc_head_id(const cq_ssm_model *m);

/* ---- tokenizer (cq-hash-v1, docs/SSM.md) ---- */

enum { CQ_SSM_TOK_PAD = 0, CQ_SSM_TOK_UNK = 1, CQ_SSM_TOK_BOS = 2, CQ_SSM_TOK_SEP = 3, CQ_SSM_TOK_QRY = 4 };
#define CQ_SSM_VOCAB_SIZE 32768

/* cq-hash-v1: tokenizes UTF-8 text; writes at most cap ids and returns how many the text has (call again with more
 * room when the result exceeds cap). Adds no marker tokens. */
size_t cq_ssm_tokenize(const char *text, size_t len, int32_t *ids, size_t cap);

/* ---- encoder ---- */

typedef enum {
    CQ_SSM_BACKEND_REF = 0,  /* plain loops, one thread: the reference */
    CQ_SSM_BACKEND_CPU = 1,  /* packed AVX2 matrix products, threads over rows and channels */
    CQ_SSM_BACKEND_CUDA = 2, /* cuBLAS + own kernels; CQ_ERR_UNSUPPORTED when built without CUDA or no GPU */
} cq_ssm_backend;

/* n_threads: CPU backend only (0 = online CPUs). */
cq_status cq_ssm_encoder_new(const cq_ssm_model *m, cq_ssm_backend backend, int n_threads, cq_ssm_encoder **out,
                             cq_err *err);
void cq_ssm_encoder_free(cq_ssm_encoder *e);
cq_ssm_backend cq_ssm_encoder_backend(const cq_ssm_encoder *e);
/* "cuda", "cpu" or "reference". */
const char *cq_ssm_backend_name(cq_ssm_backend b);

/* Encodes a document's next clauses, continuing state (fresh from cq_ssm_state_new for a new document). Each
 * clause is read as SEP + its tokens, and a new document starts with BOS. vectors: n_clauses × d_embed. */
cq_status cq_ssm_encode_document(cq_ssm_encoder *e, cq_ssm_state *state, const char *const *clauses,
                                 const size_t *lens, size_t n_clauses, float *vectors, cq_err *err);
/* The same, and with doc_vector (not NULL; the weights must have a document head, and state must be fresh) the
 * document's vector too (d_embed floats; cq_ssm_seq.doc_vector). */
cq_status cq_ssm_encode_document_vec(cq_ssm_encoder *e, cq_ssm_state *state, const char *const *clauses,
                                     const size_t *lens, size_t n_clauses, float *vectors, float *doc_vector,
                                     cq_err *err);

/* The tokens cq_ssm_encode_document reads for these clauses: BOS first when fresh (a new document's state), then
 * SEP + each clause's tokens; ends[i] (n_clauses of them, the caller's) is where clause i ends. *ids is malloc'd.
 * Touches no encoder, so a document can be tokenized on any thread (an external vocabulary's tokenize must allow
 * that) and encoded later by cq_ssm_encode_tokens. */
cq_status cq_ssm_document_tokens(const cq_ssm_model *m, bool fresh, const char *const *clauses, const size_t *lens,
                                 size_t n_clauses, int32_t **ids, size_t *n_ids, uint32_t *ends, cq_err *err);

/* Encodes n questions, each QRY + its tokens from a zero state. vectors: n × d_embed. */
cq_status cq_ssm_encode_queries(cq_ssm_encoder *e, const char *const *questions, const size_t *lens, size_t n,
                                float *vectors, cq_err *err);

/* Token level, for tests, benchmarks and training parity: one sequence of tokens cut into segments (clauses).
 * The sequence continues `state` (NULL: starts from zero and its final state is dropped). Segment i covers
 * tokens [segment_ends[i-1], segment_ends[i]); segment_ends ascends and ends at n_tokens. vectors gets one
 * pooled vector per segment (n_segments × d_embed); outputs, when not NULL, gets the final normalized hidden
 * output of every token (n_tokens × d_model). Sequences in one call are independent and may be batched. */
typedef struct {
    const int32_t *tokens;
    size_t n_tokens;
    const uint32_t *segment_ends;
    size_t n_segments;
    cq_ssm_state *state;
    float *vectors;
    float *outputs;
    /* Not NULL: the document's vector (d_embed) from its document head. The sequence must start the document
     * (state NULL or fresh): its first segments, while they end within the head's window_tokens (at least the
     * first), are pooled as train.py's doc_vectors pools them: v = normalize(doc_head.weight · [mean of their final
     * outputs (BOS included); the last one's] + doc_head.bias). Zeros for a sequence without tokens. */
    float *doc_vector;
} cq_ssm_seq;

cq_status cq_ssm_encode_tokens(cq_ssm_encoder *e, cq_ssm_seq *seqs, size_t n_seqs, cq_err *err);

/* ---- document state ---- */

cq_status cq_ssm_state_new(const cq_ssm_model *m, cq_ssm_state **out, cq_err *err);
void cq_ssm_state_free(cq_ssm_state *s);
int64_t cq_ssm_state_tokens(const cq_ssm_state *s); /* tokens read so far */

/* Serialized form (little-endian, versioned, tied to the model's shape): size, write, read back. */
size_t cq_ssm_state_size_bytes(const cq_ssm_model *m);
cq_status cq_ssm_state_save(const cq_ssm_state *s, void *buf, size_t cap, cq_err *err);
cq_status cq_ssm_state_load(const cq_ssm_model *m, const void *buf, size_t len, cq_ssm_state **out, cq_err *err);

#endif
