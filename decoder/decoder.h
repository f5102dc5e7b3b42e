/* The decoder: a Gemma-3 or Qwen2 text model read from GGUF, run on the CPU (the exact reference) or on CUDA.
 *
 * The architecture is general.architecture, and every hyper-parameter comes from the GGUF metadata (gemma3.* or
 * qwen2.*), so Gemma 3 270M, 1B, 4B ... and Qwen2 / Qwen2.5 0.5B, 1.5B, 7B (and their fine-tunes) all load.
 * Gemma 3, per layer l (x the residual stream, d = embedding_length):
 *   h = RMSNorm(x) ; q,k,v = Wq h, Wk h, Wv h ; q,k = RMSNorm per head (QK-norm) ; RoPE(q,k) (NeoX halves;
 *   base 10k on local layers, rope.freq_base = 1M on global ones, linear scaling on global ones if the file says) ;
 *   a = softmax(q k^T * scale + causal mask [+ window mask on local layers]) v ; x += RMSNorm(Wo a) ;
 *   h = RMSNorm(x) ; x += RMSNorm(Wdown (gelu_tanh(Wgate h) * Wup h))
 * with x0 = embedding * sqrt(d), logits = token_embd^T RMSNorm(x) (tied), optional final tanh soft-capping.
 * Layer l is global when (l + 1) % 6 == 0 (5 local : 1 global) unless the file gives another period; local layers
 * attend to the last sliding_window positions and keep a ring-buffer KV cache of window + batch slots, global
 * layers a full cache that grows with the sequence.
 * Qwen2, per layer: h = RMSNorm(x) ; q,k,v = Wq h + bq, Wk h + bk, Wv h + bv (grouped-query: head_count_kv KV heads) ;
 * RoPE(q,k) (NeoX halves, base rope.freq_base) ; a = softmax(q k^T / sqrt(head_dim) + causal mask) v ; x += Wo a ;
 * h = RMSNorm(x) ; x += Wdown (silu(Wgate h) * Wup h); x0 = embedding (no scale), every layer global, no QK-norm,
 * no sandwich norms, no soft-capping; logits = output^T RMSNorm(x) (output.weight, or token_embd when the file has
 * none). The GPT-2 byte-level tokenizer and ChatML come with it (decoder/tokenizer.h, cq_decoder_chat_user).
 *
 * A model is immutable once open and may be shared by several sequences (each with its own KV cache); calls on
 * one model are serialized internally, so sequences may be used from different threads (one thread per sequence
 * at a time). On CUDA, single-token steps of cq_decoder_eval_top that several threads ask for at the same time run
 * together as one batched forward. */
#ifndef CQ_DECODER_DECODER_H
#define CQ_DECODER_DECODER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decoder/tokenizer.h"
#include "decoder/top.h"
#include "core/error.h"
#include "core/latency.h"

typedef enum {
    CQ_DEVICE_AUTO = 0, /* CUDA when built with it and a GPU is present, else CPU */
    CQ_DEVICE_CPU = 1,
    CQ_DEVICE_CUDA = 2,
} cq_device;

typedef struct {
    cq_device device;
    int n_threads; /* CPU threads, the caller's included; 0: one per online CPU */
    bool exact;    /* CPU: every product in float (the reference; slower), where decode steps and part of each
                    * prompt take int16 activations otherwise (decoder/forward_cpu.h). The
                    * environment variable CLAUSEQA_CPU_EXACT=1 sets it for every decoder of the process. */
} cq_decoder_options;

/* The default weights' file name, looked for in the models folders (app/models.h; tools/fetch_model.sh fetches it). */
#define CQ_DECODER_DEFAULT_FILE "gemma-3-270m-q4_k_m.gguf"
/* The reader on the GPU when the models folders hold it (tools/fetch_model.sh fetches it too): Qwen2.5-Coder 1.5B
 * Instruct with its adapter answers better on every dev suite at a GPU ask's cost (docs/EVAL.md, issue 26); on 2 CPU
 * cores it is ~6x slower than the 270M, which stays the CPU's reader. */
#define CQ_DECODER_GPU_FILE "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

/* "auto", "cpu" or "cuda"; anything else is CQ_ERR_INVALID. */
cq_status cq_device_parse(const char *name, cq_device *out, cq_err *err);
const char *cq_device_name(cq_device d);
/* Whether CQ_DEVICE_AUTO would run on the GPU: built with CUDA and a GPU visible. */
bool cq_decoder_cuda_available(void);

/* How a model wants a conversation written: Gemma's <start_of_turn>user ... <end_of_turn>, or ChatML's
 * <|im_start|>user ... <|im_end|> (Qwen2). From tokenizer.chat_template when the file has one, else the
 * architecture. */
typedef enum {
    CQ_CHAT_GEMMA = 0,
    CQ_CHAT_CHATML = 1,
} cq_chat_format;

typedef struct {
    char architecture[32]; /* "gemma3" or "qwen2" (general.architecture) */
    cq_chat_format chat_format;
    char name[128];        /* general.name */
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int32_t context_length; /* trained context */
    int32_t sliding_window;
    int32_t n_global_layers;
    cq_device device;      /* the one in use */
} cq_decoder_info;

typedef struct cq_decoder cq_decoder;
typedef struct cq_decoder_seq cq_decoder_seq;

/* One user turn and the opening of the model's turn in the model's chat format, for CQ_TOK_PARSE_SPECIAL:
 *   gemma:  <start_of_turn>user\nMSG<end_of_turn>\n<start_of_turn>model\n
 *   chatml: <|im_start|>user\nMSG<|im_end|>\n<|im_start|>assistant\n
 * malloc'd (NULL when out of memory). */
char *cq_decoder_chat_user(const cq_decoder *d, const char *msg);

/* Opens a GGUF model (general.architecture gemma3 or qwen2). A missing file is CQ_ERR_NOT_FOUND, a broken or
 * unsupported one CQ_ERR_FORMAT or
 * CQ_ERR_UNSUPPORTED, CUDA asked for but unavailable CQ_ERR_DEVICE; err says which and why. */
cq_status cq_decoder_open(const char *path, const cq_decoder_options *opt, cq_decoder **out, cq_err *err);
void cq_decoder_close(cq_decoder *d);
const cq_decoder_info *cq_decoder_get_info(const cq_decoder *d);
const cq_tokenizer *cq_decoder_tokenizer(const cq_decoder *d);

/* A sequence of up to max_tokens positions (0: the model's context_length). KV memory grows with use on the CPU; on
 * CUDA it is allocated whole (capacity rounded up to 512 tokens), and a freed sequence's device buffers and graphs
 * are kept (up to 64) for the next one that fits, so that opening and closing one per ask costs no allocation. */
cq_status cq_decoder_seq_new(cq_decoder *d, int32_t max_tokens, cq_decoder_seq **out, cq_err *err);
void cq_decoder_seq_free(cq_decoder_seq *s);
void cq_decoder_seq_reset(cq_decoder_seq *s); /* back to position 0 */
int32_t cq_decoder_seq_pos(const cq_decoder_seq *s);   /* tokens consumed so far */
int32_t cq_decoder_seq_limit(const cq_decoder_seq *s); /* max_tokens */
const cq_decoder *cq_decoder_seq_decoder(const cq_decoder_seq *s);

/* Feeds n tokens at the sequence's current position and advances it. logits: NULL, or n_vocab floats for the
 * last token, or n * n_vocab floats (token-major) when all_logits. Bad ids or running past max_tokens are
 * CQ_ERR_INVALID and leave the sequence unchanged. */
cq_status cq_decoder_eval(cq_decoder_seq *s, const int32_t *tokens, size_t n, float *logits, bool all_logits,
                          cq_err *err);

/* Feeds one token and returns the greedy next token (the argmax of its logits, the first on ties). On CUDA the
 * argmax is taken on the GPU and the logits stay there. */
cq_status cq_decoder_eval_greedy(cq_decoder_seq *s, int32_t token, int32_t *next, cq_err *err);

/* Feeds n tokens (as cq_decoder_eval) and returns the candidates for the next one instead of its logits: the
 * req->k (1..CQ_TOP_MAX) largest logits, their log-sum-exp and the logits of req->ids (decoder/top.h). On the CPU
 * from the full logits (cq_top_from_logits); on CUDA computed on the GPU, and only they come back.
 * Continuous batching (CUDA): a caller that finds the GPU busy queues its step; whoever runs next takes every
 * queued step (up to CQ_DECODER_BATCH_MAX) as one forward (cq_cuda_decode_batch), so a sequence joins and leaves
 * the batch at any step and each caller still gets its own answer when its row is done. Alone, a step is the
 * batch-1 decode (its CUDA graph). A prompt runs alone under the model's lock, unless CLAUSEQA_BATCH_PREFILL=1 is
 * in the environment (read at cq_decoder_open): then prompts queue too, and the leader takes the queued steps and
 * then queued prompts, first come first served, up to CQ_CUDA_ROWS_MAX rows in all (a prompt that does not fit is
 * fed in part, the rest in the next forward, so steps never wait behind more than that many prompt tokens), as one
 * forward (cq_cuda_forward_rows for a mix); a prompt alone is still a plain prefill. Off by default: measured
 * slower at 4-16 clients and no faster at 64 (docs/PERF.md). Bad ids, k or n_ids are CQ_ERR_INVALID. */
#define CQ_DECODER_BATCH_MAX 64
cq_status cq_decoder_eval_top(cq_decoder_seq *s, const int32_t *tokens, size_t n, const cq_top_request *req,
                              cq_top *out, cq_err *err);

/* Phases of the decoder's work for an ask (cq_decoder_stats.phase). */
typedef enum {
    CQ_DECODER_RERANK_WAIT = 0, /* cq_decoder_score_prompts waiting for the model */
    CQ_DECODER_RERANK_RUN,      /* ... running its prompts */
    CQ_DECODER_PREFILL_WAIT,    /* a sequence's prompts (forwards of more than one token) waiting */
    CQ_DECODER_PREFILL_RUN,
    CQ_DECODER_DECODE_WAIT,     /* a sequence's single-token steps waiting (the batcher's queue, the lock) */
    CQ_DECODER_DECODE_RUN,      /* ... in the forward that ran them (a batched step counts the whole forward) */
    CQ_DECODER_PHASES
} cq_decoder_phase;
/* "rerank_wait", "rerank_run", "prefill_wait", "prefill_run", "decode_wait", "decode_run" (for /metrics). */
const char *cq_decoder_phase_name(cq_decoder_phase p);

/* What the decoder has done and holds, for /metrics. */
#define CQ_DECODER_BATCH_BUCKETS 7 /* batch sizes 1, 2-3, 4-7, 8-15, 16-31, 32-63, 64 and more */
typedef struct {
    uint64_t steps;     /* single-token steps of cq_decoder_eval_top */
    uint64_t forwards;  /* the forwards they ran in (steps / forwards: the mean batch) */
    uint64_t batch_hist[CQ_DECODER_BATCH_BUCKETS]; /* forwards by batch size */
    int64_t kv_bytes;   /* KV cache of the sequences open now */
    int64_t kv_pooled_bytes; /* CUDA: KV cache of closed sequences kept for reuse (up to 64 of them) */
    int64_t seqs;       /* sequences open now (the reranker's packed one included) */
    uint64_t prompt_forwards;        /* CUDA: forwards that fed prompts (cq_decoder_eval_top of more than a token) */
    uint64_t prompt_forwards_shared; /* of them: with another ask's prompt or steps (cq_cuda_forward_rows) */
    /* cq_decoder_score_prompts (the reranker): its prompts run in slices of at most the slice's tokens
     * (cq_decoder_set_scoring), each slice gathering the queued prompts of every waiting call first come first
     * served; queued decode steps run before the next slice. */
    uint64_t score_calls;          /* calls of cq_decoder_score_prompts */
    uint64_t score_slices;         /* slices run */
    uint64_t score_slices_shared;  /* of them: with the prompts of more than one call (several asks') */
    uint64_t score_prompts;        /* prompts scored */
    uint64_t score_tokens;         /* their tokens */
    uint64_t score_reused_tokens;  /* of them: not run again, their KV kept from the prompt before (CPU) or read from
                                    * another prompt of the packed pass (CUDA): prefix reuse */
    uint64_t step_forwards_mid_score; /* step forwards run between two slices of a call part-way through */
    /* Where the asks' decoder time goes (cq_decoder_phase): per sequence, counted when it is freed (an ask's
     * sequence: its prompt's prefill, the sum of its steps), and per call of cq_decoder_score_prompts (the
     * reranker's); each split into the wait for the model (another forward running, or queued behind others in
     * the batcher) and the run itself. */
    cq_lat_hist phase[CQ_DECODER_PHASES];
} cq_decoder_stats;
void cq_decoder_get_stats(cq_decoder *d, cq_decoder_stats *out);

/* ---- adapters ------------------------------------------------------------------------------------------------ */

/* A LoRA adapter trained on this model (docs/ANSWERS.md: the folder holds adapter.json and adapter.safetensors,
 * format clauseqa-lora-v1). Every adapted projection W becomes W + (alpha / rank) B A. The CPU runs it as a
 * low-rank side product next to the quantized weights (y += s B (A x)); CUDA merges it into its bf16 weights. */
typedef struct {
    char dir[1024];          /* the folder it was read from */
    char name[128];          /* the manifest's "name", else the folder's name */
    int64_t steps;           /* the manifest's "steps" (training steps), -1 when it gives none */
    int32_t rank;
    float alpha;
    int32_t n_adapted;       /* adapted projections, all layers together */
    char prompt_format[32];  /* the prompt it was trained on: "cq-prompt-v1" */
    char base_file[128];     /* the base model it names (base.file) */
    char base_sha256[65];
    double refusal_min_p;    /* "refusal_min_p" of adapter.json: the refusal threshold chosen for this adapter
                              * (tools/decoder_train/refusal_threshold.py), for Chinese questions when it names one
                              * per language ({"zh": t, "en": t}); 0 when it names none (the runtime's default then,
                              * CQ_ANSWER_REFUSAL_MIN_P) */
    double refusal_min_p_en; /* the same for English questions (a single number: both the same) */
    double min_confidence;   /* "min_confidence" of adapter.json: the confidence floor chosen for this adapter (a
                              * generated answer less likely falls back to the extractive one, app/answer.h), for
                              * Chinese questions when it names one per language; 0 when it names none (the
                              * runtime's default then, CQ_ANSWER_MIN_CONFIDENCE_TRAINED: no floor) */
    double min_confidence_en; /* the same for English questions */
} cq_adapter_info;

/* The folder's name next to the default model: DATA/models/answer. */
#define CQ_DECODER_DEFAULT_ADAPTER "models/answer"

/* Loads the adapter in folder dir onto d, replacing the one it had; dir NULL removes it (the base model again).
 * The adapter's base.sha256 must be the SHA-256 of d's model file (CQ_ERR_INVALID with both names otherwise; the
 * digest is cached next to the model, see decoder/lora.h). Other errors name the file, tensor or field. On any
 * error d keeps what it had, except a CUDA failure while merging (CQ_ERR_DEVICE), after which d must be closed.
 * Calls on d's sequences wait while it loads. */
cq_status cq_decoder_load_adapter(cq_decoder *d, const char *dir, cq_err *err);
/* The adapter in use, or NULL (the base model). */
const cq_adapter_info *cq_decoder_adapter(const cq_decoder *d);

/* ---- scoring prompts ---------------------------------------------------------------------------------------- */

#define CQ_DECODER_SCORE_MAX_IDS 8

/* For each of n independent prompts (token ids as the caller encoded them, BOS included; each 1 to context_length
 * tokens) the logits of n_ids token ids (at most CQ_DECODER_SCORE_MAX_IDS) at its last position:
 * out[i * n_ids + k]. On CUDA the prompts run packed, end to end, through batched prefill chunks (each token sees
 * only its own prompt: a block-diagonal causal mask; positions restart at 0 for every prompt), a few thousand tokens
 * at a time; on the CPU one after the other. What a reranker needs: one relevance prompt per candidate. */
cq_status cq_decoder_score_prompts(cq_decoder *d, const int32_t *const *prompts, const size_t *lens, size_t n,
                                   const int32_t *ids, size_t n_ids, float *out, cq_err *err);
/* How cq_decoder_score_prompts is scheduled. Calls from several threads (asks) queue their prompts; whoever runs
 * next takes queued prompts, first come first served across the calls, up to slice_tokens tokens (at least one
 * prompt) as one slice (on CUDA one packed pass; the ids of the calls merged, at most CQ_DECODER_SCORE_MAX_IDS
 * distinct in a slice), and decode steps queued meanwhile (cq_decoder_eval_top) run before the next slice, so a
 * running answer's step waits for at most one slice, never a whole rerank. An ask's scores do not depend on the
 * company: on the CPU each prompt still runs alone (bit for bit the same), on CUDA in packed passes whose chunks
 * differ with the company (bf16 rounding, tests/unit/test_decoder_cuda.c). prefix_reuse (CPU): a prompt starting
 * with the same tokens as the prompt before it (the instruction, a passage's title) runs only from where they
 * differ, on the KV cache that prompt left, while both fit the local layers' ring (logits bit-identical,
 * tests/unit/test_decoder_score.c); CUDA: within a packed pass, a prompt whose first CQ_CUDA_SHARE_MIN or more tokens
 * are those of the last prompt stored whole runs only the rest, reading that prompt's K/V rows for them
 * (cq_cuda_score_packed; logits equal within the GEMMs' rounding, test_decoder_cuda). Defaults: CLAUSEQA_RERANK_SLICE (tokens; 1536 when unset) and
 * CLAUSEQA_PREFIX_REUSE (on unless "0" on the CPU; on CUDA off unless set and not "0", until measured on a GPU),
 * read at cq_decoder_open. slice_tokens 0 keeps the current value. */
#define CQ_DECODER_SLICE_TOKENS 1536
void cq_decoder_set_scoring(cq_decoder *d, int32_t slice_tokens, bool prefix_reuse);

/* ---- generation ---------------------------------------------------------------------------------------------- */

typedef struct {
    float temperature;        /* 0: greedy */
    int32_t top_k;            /* 0: off */
    float top_p;              /* 1: off */
    float repetition_penalty; /* 1: off; > 1 discourages tokens already in the prompt or output */
    int32_t repetition_window;/* how many recent tokens the penalty looks at; 0: all */
    uint64_t seed;
} cq_sampler_params;

cq_sampler_params cq_sampler_defaults(void); /* greedy, everything off */

/* Called with each new piece of text (whole UTF-8 characters), in order; return false to stop. */
typedef bool (*cq_token_cb)(void *user, const char *text, size_t len);

typedef struct {
    cq_sampler_params sampler;
    int32_t max_tokens;       /* new tokens at most */
    const char *const *stop;  /* NULL-terminated list of stop strings (not included in the output), or NULL */
    bool stop_at_eos;         /* stop at <eos> and <end_of_turn>; default true */
    unsigned encode_flags;    /* for the prompt: CQ_TOK_ADD_BOS | CQ_TOK_PARSE_SPECIAL by default */
} cq_generate_params;

cq_generate_params cq_generate_defaults(void);

typedef struct {
    int32_t prompt_tokens, new_tokens;
    double prefill_s, decode_s;
    bool stopped_by_string, stopped_by_eos, stopped_by_callback;
} cq_generate_stats;

/* Resets s, feeds the prompt, then samples up to max_tokens tokens, streaming text through cb (may be NULL).
 * *out (may be NULL) receives the whole generated text (malloc'd). */
cq_status cq_decoder_generate(cq_decoder_seq *s, const char *prompt, const cq_generate_params *p, cq_token_cb cb,
                              void *user, char **out, cq_generate_stats *stats, cq_err *err);

/* ---- perplexity ---------------------------------------------------------------------------------------------- */

typedef struct {
    double perplexity;  /* exp(nll_sum / n_scored) */
    double nll_sum;     /* sum of -log p(token | its prefix in the window), natural log */
    int64_t n_tokens;   /* tokens of the text */
    int64_t n_scored;   /* tokens predicted (all of them: each window starts with BOS) */
    int32_t n_windows;
    double seconds;
} cq_perplexity;

/* Perplexity of a text (tokenized without parsing special tokens) in windows of at most `context` tokens (0: 512):
 * each window is BOS followed by the next context-1 text tokens, and every text token is scored once. */
cq_status cq_decoder_perplexity(cq_decoder *d, const char *text, size_t len, int32_t context, cq_perplexity *out,
                                cq_err *err);

#endif
