#define _GNU_SOURCE /* memmem */
#include "decoder/decoder.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/forward_cpu.h"
#include "decoder/forward_cuda.h"
#include "decoder/lora.h"
#include "decoder/model.h"
#include "core/clock.h"
#include "core/log.h"

#define SEQ_POOL 64    /* CUDA sequences kept for reuse at most */
#define SEQ_ROUND 512  /* their capacities are rounded up to a multiple of this */

_Static_assert(CQ_DECODER_BATCH_MAX <= CQ_CUDA_DECODE_BATCH_MAX, "a decoder batch must fit a CUDA batch");

/* Work waiting for the batcher (cq_decoder_eval_top): a single-token step, or (CUDA, batched prefills on) a prompt
 * of n tokens, which may be fed over several forwards (fed of them so far). */
typedef struct step_req {
    cq_decoder_seq *s;
    const int32_t *tokens;
    size_t n, fed;
    cq_top_request req;
    cq_top *out;
    cq_status st;
    cq_err err;
    bool done;
    double run;   /* seconds of the forwards it was part of */
    double ended; /* when its last forward ended (cq_clock_seconds) */
    struct step_req *next;
} step_req;

/* A call of cq_decoder_score_prompts waiting for the batcher: its prompts go into slices in order (taken of them so
 * far); done when every one ran (or one slice failed). */
typedef struct score_req {
    const int32_t *const *prompts;
    const size_t *lens;
    size_t n, taken;
    const int32_t *ids;
    size_t n_ids;
    float *out;
    cq_status st;
    cq_err err;
    bool done, in_slice;
    double run, ended;
    struct score_req *next;
} score_req;

/* Prompts of one slice at most (a slice is bounded by its tokens first). */
#define SLICE_PROMPTS 256

/* Rows of one forward of the batcher at most: a prompt longer than what is left waits for the next forward, so
 * that queued decode steps never wait behind more than this many prompt tokens. */
#define BATCH_ROWS CQ_CUDA_ROWS_MAX

struct cq_decoder {
    cq_gguf *gguf;
    cq_gemma model;
    cq_tokenizer *tok;
    cq_decoder_info info;
    cq_cpu_model *cpu;   /* one of the two backends */
    cq_cuda_model *cuda;
    pthread_mutex_t lock; /* one forward pass at a time: the backends share scratch and threads */
    char *path;           /* the model file */
    char sha256[65];      /* its digest, once an adapter asked for it; "" before */
    cq_adapter_info adapter;
    bool has_adapter;
    cq_cuda_seq *pack;    /* CUDA: the flat sequence packed prompts run in (cq_decoder_score_prompts), or NULL */
    int32_t pack_tokens;  /* its capacity */
    /* the batcher: steps queued (FIFO), whether one caller runs a batch now; batch_mu guards them and the stats */
    pthread_mutex_t batch_mu;
    pthread_cond_t batch_cv;
    step_req *queue_head, *queue_tail;
    bool batch_busy;
    cq_top batch_out[CQ_DECODER_BATCH_MAX]; /* the running batch's candidates (one batch at a time) */
    score_req *score_head, *score_tail; /* cq_decoder_score_prompts calls waiting (FIFO; batch_mu) */
    int32_t slice_tokens;  /* a scoring slice's tokens at most (at least one prompt) */
    bool prefix_reuse;     /* a prompt's common prefix with another runs once (CPU: the one before; CUDA: in a pass) */
    /* the leader's (one at a time, under lock): the CPU's logits of a step or prompt; the CPU scoring sequence and
     * the tokens whose KV it holds at positions [0, n_cached) */
    float *logits;
    cq_decoder_seq *score_seq;
    int32_t *cached;
    size_t n_cached, cap_cached;
    bool batch_prefill; /* CUDA: prompts go through the batcher too (CLAUSEQA_BATCH_PREFILL=1 turns it on) */
    /* CUDA sequences closed and kept for the next ones (batch_mu guards them): a new sequence's device buffers and
     * its decode graphs cost milliseconds, and cudaFree waits for the whole GPU, so an ask per sequence would
     * otherwise serialize every other ask's steps behind it. Capacities are multiples of SEQ_ROUND tokens. */
    cq_cuda_seq *pool[SEQ_POOL];
    int32_t pool_cap[SEQ_POOL];
    int n_pool;
    cq_decoder_stats stats;
};

struct cq_decoder_seq {
    cq_decoder *d;
    int32_t pos, max_tokens;
    cq_cpu_seq *cpu;
    cq_cuda_seq *cuda;
    int64_t kv_counted; /* its KV bytes in the stats: CUDA's whole cache, the CPU's at creation (it grows later) */
    int32_t cuda_cap;   /* CUDA: the tokens its cache holds (>= max_tokens: pooled sequences are reused) */
    /* its time for the stats' phases, counted when it is freed: prompts (forwards of more than one token) and
     * single-token steps, waiting and running; internal: the CPU reranker's, counted as rerank instead */
    double prefill_wait, prefill_run, step_wait, step_run;
    int32_t n_prefill, n_steps;
    bool internal;
};

const char *cq_decoder_phase_name(cq_decoder_phase p) {
    static const char *const names[CQ_DECODER_PHASES] = {"rerank_wait",  "rerank_run", "prefill_wait",
                                                         "prefill_run",  "decode_wait", "decode_run"};
    return p >= 0 && p < CQ_DECODER_PHASES ? names[p] : "?";
}

/* A forward's wait for the model and its run, on the sequence's account (prefill: more than one token). */
static void seq_time(cq_decoder_seq *s, bool prefill, double wait, double run) {
    if (prefill) s->prefill_wait += wait, s->prefill_run += run, s->n_prefill++;
    else s->step_wait += wait, s->step_run += run, s->n_steps++;
}

/* A closed sequence's time into the phase histograms (batch_mu held). */
static void account_seq(cq_decoder *d, const cq_decoder_seq *s) {
    if (s->internal) return;
    cq_lat_hist *h = d->stats.phase;
    if (s->n_prefill) {
        cq_lat_hist_add(&h[CQ_DECODER_PREFILL_WAIT], s->prefill_wait);
        cq_lat_hist_add(&h[CQ_DECODER_PREFILL_RUN], s->prefill_run);
    }
    if (s->n_steps) {
        cq_lat_hist_add(&h[CQ_DECODER_DECODE_WAIT], s->step_wait);
        cq_lat_hist_add(&h[CQ_DECODER_DECODE_RUN], s->step_run);
    }
}

cq_status cq_device_parse(const char *name, cq_device *out, cq_err *err) {
    if (!strcmp(name, "auto")) *out = CQ_DEVICE_AUTO;
    else if (!strcmp(name, "cpu")) *out = CQ_DEVICE_CPU;
    else if (!strcmp(name, "cuda")) *out = CQ_DEVICE_CUDA;
    else return cq_err_set(err, CQ_ERR_INVALID, "unknown device '%s' (auto, cpu or cuda)", name);
    return CQ_OK;
}

const char *cq_device_name(cq_device d) {
    return d == CQ_DEVICE_CUDA ? "cuda" : d == CQ_DEVICE_CPU ? "cpu" : "auto";
}

bool cq_decoder_cuda_available(void) { return cq_cuda_available(); }

cq_status cq_decoder_open(const char *path, const cq_decoder_options *opt, cq_decoder **out, cq_err *err) {
    *out = NULL;
    cq_decoder_options o = opt ? *opt : (cq_decoder_options){0};
    cq_decoder *d = calloc(1, sizeof *d);
    if (!d) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&d->lock, NULL);
    pthread_mutex_init(&d->batch_mu, NULL);
    pthread_cond_init(&d->batch_cv, NULL);
    d->path = strdup(path);
    cq_status s = d->path ? cq_gguf_open(path, &d->gguf, err) : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!s) {
        s = cq_gemma_load(d->gguf, &d->model, err);
        if (s) cq_err_prefix(err, "%s: ", path);
    }
    if (!s) s = cq_tokenizer_from_gguf(d->gguf, &d->tok, err);
    if (!s && cq_tokenizer_vocab_size(d->tok) != d->model.n_vocab)
        s = cq_err_set(err, CQ_ERR_FORMAT, "%s: the vocabulary has %d tokens but the embedding %d rows", path,
                       cq_tokenizer_vocab_size(d->tok), d->model.n_vocab);
    /* AUTO takes the GPU when there is one and falls back to the CPU (with a warning) if it cannot be used. */
    if (!s && (o.device == CQ_DEVICE_CUDA || (o.device == CQ_DEVICE_AUTO && cq_cuda_available()))) {
        s = cq_cuda_model_new(&d->model, &d->cuda, err);
        if (s) {
            cq_cuda_model_free(d->cuda);
            d->cuda = NULL;
            if (o.device == CQ_DEVICE_CUDA) {
                cq_err_prefix(err, "decoder: CUDA was asked for: ");
            } else {
                CQ_WARN("decoder: GPU not usable (%s); running on the CPU", err ? err->msg : "");
                cq_err_clear(err);
                s = CQ_OK;
            }
        }
    }
    if (!s && !d->cuda) s = cq_cpu_model_new(&d->model, o.n_threads, o.exact, &d->cpu, err);
    if (s) {
        cq_decoder_close(d);
        return s;
    }
    const cq_gemma *m = &d->model;
    cq_decoder_info *i = &d->info;
    snprintf(i->architecture, sizeof i->architecture, "%s", m->arch_name);
    i->chat_format = m->arch == CQ_ARCH_QWEN2 ? CQ_CHAT_CHATML : CQ_CHAT_GEMMA;
    const cq_gguf_kv *tmpl = cq_gguf_find_kv(d->gguf, "tokenizer.chat_template");
    if (tmpl && tmpl->type == CQ_GGUF_STRING) {
        if (memmem(tmpl->v.s.ptr, (size_t)tmpl->v.s.len, "<|im_start|>", 12)) i->chat_format = CQ_CHAT_CHATML;
        else if (memmem(tmpl->v.s.ptr, (size_t)tmpl->v.s.len, "<start_of_turn>", 15)) i->chat_format = CQ_CHAT_GEMMA;
    }
    snprintf(i->name, sizeof i->name, "%s", m->name);
    i->n_vocab = m->n_vocab, i->n_embd = m->n_embd, i->n_layer = m->n_layer, i->n_head = m->n_head;
    i->n_head_kv = m->n_head_kv, i->head_dim = m->head_dim, i->n_ff = m->n_ff;
    i->context_length = m->context_length, i->sliding_window = m->window, i->n_global_layers = m->n_global;
    i->device = d->cuda ? CQ_DEVICE_CUDA : CQ_DEVICE_CPU;
    /* opt-in: measured on the H200 (docs/PERF.md), prompts batched with other asks' prompts and steps made asks
     * slower at 4-16 clients (steps riding in forwards of hundreds of prompt rows) and no faster at 64 */
    const char *bp = getenv("CLAUSEQA_BATCH_PREFILL");
    d->batch_prefill = d->cuda && bp && bp[0] && strcmp(bp, "0") != 0;
    const char *sl = getenv("CLAUSEQA_RERANK_SLICE"), *pr = getenv("CLAUSEQA_PREFIX_REUSE");
    d->slice_tokens = sl && atoi(sl) > 0 ? atoi(sl) : CQ_DECODER_SLICE_TOKENS;
    /* on by default on the CPU (bit-identical); on CUDA only when asked for (CLAUSEQA_PREFIX_REUSE=1) until the GPU
     * run of test_decoder_cuda's prefix tests has passed (issue 31) */
    d->prefix_reuse = d->cuda ? pr && *pr && strcmp(pr, "0") : !(pr && !strcmp(pr, "0"));
    *out = d;
    return CQ_OK;
}

char *cq_decoder_chat_user(const cq_decoder *d, const char *msg) {
    const bool chatml = d->info.chat_format == CQ_CHAT_CHATML;
    const char *pre = chatml ? "<|im_start|>user\n" : "<start_of_turn>user\n";
    const char *post = chatml ? "<|im_end|>\n<|im_start|>assistant\n" : "<end_of_turn>\n<start_of_turn>model\n";
    size_t n = strlen(pre) + strlen(msg) + strlen(post) + 1;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%s%s%s", pre, msg, post);
    return out;
}

void cq_decoder_close(cq_decoder *d) {
    if (!d) return;
    cq_decoder_seq_free(d->score_seq);
    free(d->cached), free(d->logits);
    for (int i = 0; i < d->n_pool; i++) cq_cuda_seq_free(d->pool[i]);
    cq_cuda_seq_free(d->pack);
    cq_cpu_model_free(d->cpu);
    cq_cuda_model_free(d->cuda);
    cq_tokenizer_free(d->tok);
    cq_gemma_free(&d->model);
    cq_gguf_close(d->gguf);
    pthread_mutex_destroy(&d->lock);
    pthread_mutex_destroy(&d->batch_mu);
    pthread_cond_destroy(&d->batch_cv);
    free(d->path);
    free(d);
}

cq_status cq_decoder_load_adapter(cq_decoder *d, const char *dir, cq_err *err) {
    cq_lora *l = NULL;
    cq_status s = CQ_OK;
    if (dir) {
        if (!d->sha256[0] && (s = cq_model_file_sha256(d->path, d->sha256, err))) {
            d->sha256[0] = 0;
            return cq_err_prefix(err, "adapter %s: ", dir);
        }
        if ((s = cq_lora_load(dir, &d->model, d->sha256, &l, err))) return s;
    }
    pthread_mutex_lock(&d->lock);
    s = d->cuda ? cq_cuda_model_set_lora(d->cuda, l, err) : cq_cpu_model_set_lora(d->cpu, l, err);
    if (!s) {
        d->has_adapter = l != NULL;
        if (l) d->adapter = l->info;
    }
    d->n_cached = 0; /* the scoring sequence's KV was made with the weights before */
    pthread_mutex_unlock(&d->lock);
    cq_lora_free(l);
    return s;
}

const cq_adapter_info *cq_decoder_adapter(const cq_decoder *d) { return d->has_adapter ? &d->adapter : NULL; }

const cq_decoder_info *cq_decoder_get_info(const cq_decoder *d) { return &d->info; }
const cq_tokenizer *cq_decoder_tokenizer(const cq_decoder *d) { return d->tok; }

/* A sequence opened (n 1, its KV bytes) or closed (n -1, minus them), for the stats. */
static void count_seq(cq_decoder *d, int64_t bytes, int n) {
    pthread_mutex_lock(&d->batch_mu);
    d->stats.kv_bytes += bytes;
    d->stats.seqs += n;
    pthread_mutex_unlock(&d->batch_mu);
}

cq_status cq_decoder_seq_new(cq_decoder *d, int32_t max_tokens, cq_decoder_seq **out, cq_err *err) {
    *out = NULL;
    if (max_tokens <= 0) max_tokens = d->model.context_length;
    if (max_tokens > d->model.context_length)
        return cq_err_set(err, CQ_ERR_INVALID, "decoder: %d tokens exceed the model's context of %d", max_tokens,
                          d->model.context_length);
    cq_decoder_seq *s = calloc(1, sizeof *s);
    if (!s) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    s->d = d;
    s->max_tokens = max_tokens;
    cq_status st = CQ_OK;
    if (d->cuda) { /* the smallest pooled sequence that holds max_tokens, else a new one */
        pthread_mutex_lock(&d->batch_mu);
        int best = -1;
        for (int i = 0; i < d->n_pool; i++)
            if (d->pool_cap[i] >= max_tokens && (best < 0 || d->pool_cap[i] < d->pool_cap[best])) best = i;
        if (best >= 0) {
            s->cuda = d->pool[best], s->cuda_cap = d->pool_cap[best];
            d->pool[best] = d->pool[d->n_pool - 1], d->pool_cap[best] = d->pool_cap[d->n_pool - 1];
            d->n_pool--;
            d->stats.kv_pooled_bytes -= (int64_t)cq_cuda_seq_kv_bytes(s->cuda);
        }
        pthread_mutex_unlock(&d->batch_mu);
        if (!s->cuda) {
            int32_t cap = (max_tokens + SEQ_ROUND - 1) / SEQ_ROUND * SEQ_ROUND;
            if (cap > d->model.context_length) cap = d->model.context_length;
            st = cq_cuda_seq_new(d->cuda, cap, &s->cuda, err);
            s->cuda_cap = cap;
        }
    } else {
        st = cq_cpu_seq_new(d->cpu, max_tokens, &s->cpu, err);
    }
    if (st) { /* a half-made sequence: neither counted nor pooled */
        cq_cpu_seq_free(s->cpu);
        cq_cuda_seq_free(s->cuda);
        free(s);
        return st;
    }
    s->kv_counted = s->cuda ? (int64_t)cq_cuda_seq_kv_bytes(s->cuda) : (int64_t)cq_cpu_seq_kv_bytes(s->cpu);
    count_seq(d, s->kv_counted, 1);
    *out = s;
    return CQ_OK;
}

void cq_decoder_seq_free(cq_decoder_seq *s) {
    if (!s) return;
    cq_decoder *d = s->d;
    if (s->cuda || s->cpu) count_seq(d, -s->kv_counted, -1);
    if (s->n_prefill || s->n_steps) {
        pthread_mutex_lock(&d->batch_mu);
        account_seq(d, s);
        pthread_mutex_unlock(&d->batch_mu);
    }
    cq_cpu_seq_free(s->cpu);
    if (s->cuda) {
        pthread_mutex_lock(&d->batch_mu);
        if (d->n_pool < SEQ_POOL) {
            d->pool[d->n_pool] = s->cuda, d->pool_cap[d->n_pool] = s->cuda_cap;
            d->n_pool++;
            d->stats.kv_pooled_bytes += (int64_t)cq_cuda_seq_kv_bytes(s->cuda);
            s->cuda = NULL;
        }
        pthread_mutex_unlock(&d->batch_mu);
        cq_cuda_seq_free(s->cuda);
    }
    free(s);
}

void cq_decoder_seq_reset(cq_decoder_seq *s) { s->pos = 0; }
int32_t cq_decoder_seq_pos(const cq_decoder_seq *s) { return s->pos; }
int32_t cq_decoder_seq_limit(const cq_decoder_seq *s) { return s->max_tokens; }
const cq_decoder *cq_decoder_seq_decoder(const cq_decoder_seq *s) { return s->d; }

cq_status cq_decoder_eval(cq_decoder_seq *s, const int32_t *tokens, size_t n, float *logits, bool all_logits,
                          cq_err *err) {
    if (n == 0) return CQ_OK;
    if (n > (size_t)(s->max_tokens - s->pos))
        return cq_err_set(err, CQ_ERR_INVALID, "decoder: %zu more tokens at position %d exceed the sequence limit of %d",
                          n, s->pos, s->max_tokens);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->d->model.n_vocab)
            return cq_err_set(err, CQ_ERR_INVALID, "decoder: token id %d out of range", tokens[i]);
    const double t0 = cq_clock_seconds();
    pthread_mutex_lock(&s->d->lock);
    const double t1 = cq_clock_seconds();
    cq_status st = s->cuda ? cq_cuda_eval(s->cuda, tokens, n, s->pos, logits, all_logits, err)
                           : cq_cpu_eval(s->cpu, tokens, n, s->pos, logits, all_logits, err);
    pthread_mutex_unlock(&s->d->lock);
    seq_time(s, n > 1, t1 - t0, cq_clock_seconds() - t1);
    if (!st) s->pos += (int32_t)n;
    return st;
}

cq_status cq_decoder_eval_greedy(cq_decoder_seq *s, int32_t token, int32_t *next, cq_err *err) {
    if (!s->cuda) {
        const int32_t V = s->d->model.n_vocab;
        float *logits = malloc((size_t)V * sizeof *logits);
        if (!logits) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        cq_status st = cq_decoder_eval(s, &token, 1, logits, false, err);
        if (!st) {
            int32_t best = 0;
            for (int32_t i = 1; i < V; i++)
                if (logits[i] > logits[best]) best = i;
            *next = best;
        }
        free(logits);
        return st;
    }
    if (s->pos >= s->max_tokens)
        return cq_err_set(err, CQ_ERR_INVALID, "decoder: 1 more token at position %d exceeds the sequence limit of %d",
                          s->pos, s->max_tokens);
    if (token < 0 || token >= s->d->model.n_vocab)
        return cq_err_set(err, CQ_ERR_INVALID, "decoder: token id %d out of range", token);
    const double t0 = cq_clock_seconds();
    pthread_mutex_lock(&s->d->lock);
    const double t1 = cq_clock_seconds();
    cq_status st = cq_cuda_decode_greedy(s->cuda, token, s->pos, next, err);
    pthread_mutex_unlock(&s->d->lock);
    seq_time(s, false, t1 - t0, cq_clock_seconds() - t1);
    if (!st) s->pos++;
    return st;
}

/* Checks a step's tokens and request against s. */
static cq_status check_top(const cq_decoder_seq *s, const int32_t *tokens, size_t n, const cq_top_request *req,
                           cq_err *err) {
    if (n == 0) return cq_err_set(err, CQ_ERR_INVALID, "decoder: candidates after no token");
    if (n > (size_t)(s->max_tokens - s->pos))
        return cq_err_set(err, CQ_ERR_INVALID, "decoder: %zu more tokens at position %d exceed the sequence limit of %d",
                          n, s->pos, s->max_tokens);
    const int32_t V = s->d->model.n_vocab;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return cq_err_set(err, CQ_ERR_INVALID, "decoder: token id %d out of range", tokens[i]);
    if (req->k < 1 || req->k > CQ_TOP_MAX)
        return cq_err_set(err, CQ_ERR_INVALID, "decoder: %d candidates asked for (1 to %d)", req->k, CQ_TOP_MAX);
    if (req->n_ids < 0 || req->n_ids > CQ_TOP_MAX_IDS)
        return cq_err_set(err, CQ_ERR_INVALID, "decoder: %d named ids (0 to %d)", req->n_ids, CQ_TOP_MAX_IDS);
    for (int j = 0; j < req->n_ids; j++)
        if (req->ids[j] < 0 || req->ids[j] >= V)
            return cq_err_set(err, CQ_ERR_INVALID, "decoder: token id %d out of range", req->ids[j]);
    return CQ_OK;
}

static int batch_bucket(int B) {
    int b = 0;
    while (b + 1 < CQ_DECODER_BATCH_BUCKETS && B >= (2 << b)) b++;
    return b;
}

/* Takes r off the queue (prev: the request before it, NULL at the head). */
static void unlink_req(cq_decoder *d, step_req *prev, step_req *r) {
    if (prev) prev->next = r->next;
    else d->queue_head = r->next;
    if (d->queue_tail == r) d->queue_tail = prev;
    r->next = NULL;
}

/* Whether a scoring call has had some of its prompts run and waits for more (batch_mu held). */
static bool score_part_way(const cq_decoder *d) {
    for (const score_req *r = d->score_head; r; r = r->next)
        if (r->taken > 0 && !r->done) return true;
    return false;
}

/* One request's share of a forward: rows [fed, fed + count) of its tokens; last: its final rows (its candidates). */
typedef struct {
    step_req *r;
    int32_t count;
    bool last;
} share;

/* The leader's turn (batch_mu held on entry and exit, released while the GPU runs): every queued step (up to
 * CQ_DECODER_BATCH_MAX), then queued prompts first come first served while the forward has rows left (BATCH_ROWS;
 * a prompt that does not fit whole is fed in part and stays at the queue's head), as one forward; each request whose
 * last rows ran is marked done with its outcome. Alone, a step is the batch-1 decode (its graph) and a prompt a
 * plain prefill (cq_cuda_eval_top); steps alone are cq_cuda_decode_batch (graphs per B); a mix is
 * cq_cuda_forward_rows. */
static void run_batch_cuda(cq_decoder *d) {
    share sh[CQ_DECODER_BATCH_MAX];
    int n_sh = 0, n_steps = 0, n_out = 0, rows = 0;
    for (step_req *prev = NULL, *r = d->queue_head, *next; r && n_out < CQ_DECODER_BATCH_MAX; r = next) {
        next = r->next;
        if (r->n != 1) {
            prev = r;
            continue;
        }
        unlink_req(d, prev, r);
        sh[n_sh++] = (share){r, 1, true};
        n_steps++, n_out++, rows++;
    }
    const bool prompt_alone = n_sh == 0 && d->queue_head && d->queue_head->n > 1 && d->queue_head->fed == 0 &&
                              !d->queue_head->next;
    if (prompt_alone) { /* nobody else waits: the whole prompt as a plain prefill */
        step_req *r = d->queue_head;
        unlink_req(d, NULL, r);
        sh[n_sh++] = (share){r, (int32_t)r->n, true};
        n_out++;
    }
    for (step_req *prev = NULL, *r = prompt_alone ? NULL : d->queue_head, *next;
         r && n_out < CQ_DECODER_BATCH_MAX && rows < BATCH_ROWS; r = next) {
        next = r->next;
        if (r->n == 1) { /* a step queued after the first pass filled the outputs */
            prev = r;
            continue;
        }
        const size_t left = r->n - r->fed;
        const int32_t take = left <= (size_t)(BATCH_ROWS - rows) ? (int32_t)left : BATCH_ROWS - rows;
        const bool last = (size_t)take == left;
        sh[n_sh++] = (share){r, take, last};
        rows += take;
        if (last) {
            unlink_req(d, prev, r);
            n_out++;
        } else {
            prev = r;
        }
    }
    const bool mid_score = score_part_way(d);
    d->batch_busy = true;
    pthread_mutex_unlock(&d->batch_mu);

    cq_cuda_seq *seqs[BATCH_ROWS];
    int32_t tokens[BATCH_ROWS], pos[BATCH_ROWS], out_rows[CQ_DECODER_BATCH_MAX];
    cq_top_request reqs[CQ_DECODER_BATCH_MAX];
    cq_top *outs = d->batch_out;
    cq_err e = {0};
    cq_status st;
    pthread_mutex_lock(&d->lock);
    const double started = cq_clock_seconds();
    if (prompt_alone) {
        step_req *r = sh[0].r;
        st = cq_cuda_eval_top(r->s->cuda, r->tokens, r->n, r->s->pos, &r->req, &outs[0], &e);
    } else if (n_steps == n_sh) { /* decode steps only */
        for (int i = 0; i < n_sh; i++) {
            step_req *r = sh[i].r;
            seqs[i] = r->s->cuda, tokens[i] = r->tokens[0], pos[i] = r->s->pos, reqs[i] = r->req;
        }
        st = cq_cuda_decode_batch(seqs, tokens, pos, n_sh, reqs, outs, &e);
    } else {
        int R = 0, o = 0;
        for (int i = 0; i < n_sh; i++) {
            step_req *r = sh[i].r;
            for (int32_t t = 0; t < sh[i].count; t++, R++) {
                seqs[R] = r->s->cuda;
                tokens[R] = r->tokens[r->fed + (size_t)t];
                pos[R] = r->s->pos + (int32_t)r->fed + t;
            }
            if (sh[i].last) out_rows[o] = R - 1, reqs[o++] = r->req;
        }
        st = cq_cuda_forward_rows(seqs, tokens, pos, R, out_rows, o, reqs, outs, &e);
    }
    pthread_mutex_unlock(&d->lock);
    const double ended = cq_clock_seconds();

    pthread_mutex_lock(&d->batch_mu);
    for (int i = 0, o = 0; i < n_sh; i++) {
        step_req *r = sh[i].r;
        r->run += ended - started;
        r->ended = ended;
        if (st) { /* a failed forward ends every request in it; one left queued in part leaves the queue */
            if (!sh[i].last) {
                step_req *prev = NULL;
                for (step_req *q = d->queue_head; q && q != r; q = q->next) prev = q;
                unlink_req(d, prev, r);
            }
            r->st = st, r->err = e, r->done = true;
            continue;
        }
        r->fed += (size_t)sh[i].count;
        if (!sh[i].last) continue;
        *r->out = outs[o++];
        r->s->pos += (int32_t)r->n;
        r->done = true;
    }
    if (n_steps) {
        d->stats.steps += (uint64_t)n_steps;
        d->stats.forwards++;
        d->stats.batch_hist[batch_bucket(n_steps)]++;
        if (mid_score) d->stats.step_forwards_mid_score++;
    }
    if (n_sh > n_steps) {
        d->stats.prompt_forwards++;
        if (n_sh - n_steps > 1 || n_steps) d->stats.prompt_forwards_shared++;
    }
    d->batch_busy = false;
    pthread_cond_broadcast(&d->batch_cv);
}

/* The CPU leader's turn for steps (batch_mu held on entry and exit, released while they run): every queued step,
 * one after another (the CPU has no batched step; on the CPU only single-token steps queue). */
static void run_steps_cpu(cq_decoder *d) {
    step_req *list = d->queue_head;
    d->queue_head = d->queue_tail = NULL;
    const bool mid_score = score_part_way(d);
    d->batch_busy = true;
    pthread_mutex_unlock(&d->batch_mu);
    const int32_t V = d->model.n_vocab;
    pthread_mutex_lock(&d->lock);
    cq_status nomem = CQ_OK;
    if (!d->logits && !(d->logits = malloc((size_t)V * sizeof *d->logits))) nomem = CQ_ERR_NOMEM;
    for (step_req *r = list; r; r = r->next) {
        const double started = cq_clock_seconds();
        r->st = nomem ? cq_err_set(&r->err, CQ_ERR_NOMEM, "out of memory")
                      : cq_cpu_eval(r->s->cpu, r->tokens, 1, r->s->pos, d->logits, false, &r->err);
        if (!r->st) cq_top_from_logits(d->logits, V, &r->req, r->out);
        r->ended = cq_clock_seconds();
        r->run = r->ended - started;
    }
    pthread_mutex_unlock(&d->lock);
    pthread_mutex_lock(&d->batch_mu);
    for (step_req *r = list, *next; r; r = next) {
        next = r->next; /* r belongs to its caller once done */
        if (!r->st) r->s->pos++;
        d->stats.steps++, d->stats.forwards++, d->stats.batch_hist[0]++;
        if (mid_score) d->stats.step_forwards_mid_score++;
        r->done = true;
    }
    d->batch_busy = false;
    pthread_cond_broadcast(&d->batch_cv);
}

/* The longest common prefix of a and b. */
static size_t common_prefix(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* Whether prompt a sorts before prompt b (token by token, a prefix first). */
static bool tokens_before(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    const size_t c = common_prefix(a, na, b, nb);
    return c < na && (c == nb ? false : a[c] < b[c]);
}

/* CPU scoring (d->lock held): each prompt alone on the scoring sequence. With prefix reuse the prompts run in token
 * order (so that prompts sharing a beginning are neighbours: the instruction and a passage's title within an ask,
 * the whole passage when several asks rerank the same clause), and each runs only from where it leaves the tokens
 * whose KV the sequence holds (the prompt before), rounded down to a whole chunk (CQ_CPU_BATCH): the chunks fed are
 * then exactly those of the prompt fed whole, and the rows before them were made by the same chunks of the same
 * tokens, so the logits are bit for bit the same. Only while every position written since fits the local layers'
 * ring (slot = position % ring), so that no cached row was overwritten; at least one token is fed. */
static cq_status score_cpu(cq_decoder *d, const int32_t *const *prompts, const size_t *lens, size_t n,
                           const int32_t *ids, size_t n_ids, float *out, uint64_t *reused, cq_err *err) {
    const int32_t V = d->model.n_vocab;
    cq_status st = CQ_OK;
    if (!d->logits && !(d->logits = malloc((size_t)V * sizeof *d->logits)))
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!d->score_seq) {
        if ((st = cq_decoder_seq_new(d, 0, &d->score_seq, err))) return st;
        d->score_seq->internal = true;
        d->n_cached = 0;
    }
    size_t order[SLICE_PROMPTS];
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        while (j > 0 && d->prefix_reuse && tokens_before(prompts[i], lens[i], prompts[order[j - 1]], lens[order[j - 1]]))
            order[j] = order[j - 1], j--;
        order[j] = i;
    }
    const size_t ring = d->model.window > 0 ? (size_t)d->model.window + CQ_CPU_BATCH : SIZE_MAX;
    for (size_t o = 0; !st && o < n; o++) {
        const size_t i = order[o];
        size_t from = 0;
        if (d->prefix_reuse && lens[i] <= ring) {
            from = common_prefix(prompts[i], lens[i], d->cached, d->n_cached);
            if (from >= lens[i]) from = lens[i] - 1;
            from -= from % CQ_CPU_BATCH;
        }
        st = cq_cpu_eval(d->score_seq->cpu, prompts[i] + from, lens[i] - from, (int32_t)from, d->logits, false, err);
        d->n_cached = 0;
        if (st) break;
        *reused += from;
        for (size_t k = 0; k < n_ids; k++) out[i * n_ids + k] = d->logits[ids[k]];
        if (lens[i] > ring) continue;
        if (lens[i] > d->cap_cached) {
            int32_t *c = realloc(d->cached, lens[i] * sizeof *c);
            if (!c) continue;
            d->cached = c, d->cap_cached = lens[i];
        }
        memcpy(d->cached, prompts[i], lens[i] * sizeof *d->cached);
        d->n_cached = lens[i];
    }
    return st;
}

static cq_status score_packed(cq_decoder *d, const int32_t *const *prompts, const size_t *lens, size_t n,
                              const int32_t *ids, size_t n_ids, float *out, uint64_t *reused, cq_err *err);

/* One scoring slice (batch_mu held on entry and exit, released while it runs): the queued calls' next prompts, first
 * come first served, up to d->slice_tokens tokens (at least one prompt) and SLICE_PROMPTS prompts, with at most
 * CQ_DECODER_SCORE_MAX_IDS distinct ids among the calls taken; each call's logits are picked from the merged ids. */
static void run_slice(cq_decoder *d) {
    const int32_t *ptr[SLICE_PROMPTS];
    size_t lens[SLICE_PROMPTS];
    score_req *owner[SLICE_PROMPTS];
    size_t index[SLICE_PROMPTS];
    int32_t uids[CQ_DECODER_SCORE_MAX_IDS];
    size_t n_uids = 0, n = 0, tokens = 0;
    int n_calls = 0;
    for (score_req *r = d->score_head; r && n < SLICE_PROMPTS; r = r->next) {
        if (r->taken == r->n) continue;
        if (n && tokens + r->lens[r->taken] > (size_t)d->slice_tokens) break;
        int32_t merged[CQ_DECODER_SCORE_MAX_IDS];
        size_t n_merged = n_uids;
        memcpy(merged, uids, n_uids * sizeof *uids);
        bool fits = true;
        for (size_t k = 0; fits && k < r->n_ids; k++) {
            size_t j = 0;
            while (j < n_merged && merged[j] != r->ids[k]) j++;
            if (j < n_merged) continue;
            if (n_merged == CQ_DECODER_SCORE_MAX_IDS) fits = false;
            else merged[n_merged++] = r->ids[k];
        }
        if (!fits) break; /* the next slice takes it */
        memcpy(uids, merged, n_merged * sizeof *uids);
        n_uids = n_merged;
        r->in_slice = true;
        n_calls++;
        while (r->taken < r->n && n < SLICE_PROMPTS && (n == 0 || tokens + r->lens[r->taken] <= (size_t)d->slice_tokens)) {
            ptr[n] = r->prompts[r->taken], lens[n] = r->lens[r->taken];
            owner[n] = r, index[n] = r->taken;
            tokens += lens[n++];
            r->taken++;
        }
        if (r->taken < r->n) break; /* the slice is full */
    }
    d->batch_busy = true;
    pthread_mutex_unlock(&d->batch_mu);

    float got[SLICE_PROMPTS * CQ_DECODER_SCORE_MAX_IDS];
    uint64_t reused = 0;
    cq_err e = {0};
    pthread_mutex_lock(&d->lock);
    const double started = cq_clock_seconds();
    cq_status st = d->cuda ? score_packed(d, ptr, lens, n, uids, n_uids, got, &reused, &e)
                           : score_cpu(d, ptr, lens, n, uids, n_uids, got, &reused, &e);
    const double ended = cq_clock_seconds();
    pthread_mutex_unlock(&d->lock);

    pthread_mutex_lock(&d->batch_mu);
    for (size_t i = 0; !st && i < n; i++) {
        score_req *r = owner[i];
        for (size_t k = 0; k < r->n_ids; k++) {
            size_t j = 0;
            while (uids[j] != r->ids[k]) j++;
            r->out[index[i] * r->n_ids + k] = got[i * n_uids + j];
        }
    }
    for (score_req *prev = NULL, *r = d->score_head, *next; r; r = next) {
        next = r->next;
        if (!r->in_slice) {
            prev = r;
            continue;
        }
        r->in_slice = false;
        r->run += ended - started;
        r->ended = ended;
        if (st) r->st = st, r->err = e;
        if (!st && r->taken < r->n) {
            prev = r;
            continue;
        }
        if (prev) prev->next = next; /* done: off the queue, and its caller's again */
        else d->score_head = next;
        if (d->score_tail == r) d->score_tail = prev;
        r->done = true;
    }
    d->stats.score_slices++;
    if (n_calls > 1) d->stats.score_slices_shared++;
    d->stats.score_prompts += n;
    d->stats.score_tokens += tokens;
    d->stats.score_reused_tokens += reused;
    d->batch_busy = false;
    pthread_cond_broadcast(&d->batch_cv);
}

/* Whoever finds the batcher idle runs the next piece of work (batch_mu held on entry and exit): queued steps (and,
 * CUDA with batched prefills, prompts) first, else one scoring slice. */
static void run_queued(cq_decoder *d) {
    if (d->queue_head) {
        if (d->cuda) run_batch_cuda(d);
        else run_steps_cpu(d);
    } else if (d->score_head) {
        run_slice(d);
    }
}

void cq_decoder_set_scoring(cq_decoder *d, int32_t slice_tokens, bool prefix_reuse) {
    pthread_mutex_lock(&d->lock);
    if (slice_tokens > 0) d->slice_tokens = slice_tokens;
    d->prefix_reuse = prefix_reuse;
    if (!prefix_reuse) d->n_cached = 0;
    pthread_mutex_unlock(&d->lock);
}

cq_status cq_decoder_eval_top(cq_decoder_seq *s, const int32_t *tokens, size_t n, const cq_top_request *req,
                              cq_top *out, cq_err *err) {
    cq_decoder *d = s->d;
    cq_status st = check_top(s, tokens, n, req, err);
    if (st) return st;
    if (!s->cuda && n > 1) { /* a CPU prompt runs directly; its steps queue, to be run between scoring slices */
        float *logits = malloc((size_t)d->model.n_vocab * sizeof *logits);
        if (!logits) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        if (!(st = cq_decoder_eval(s, tokens, n, logits, false, err))) cq_top_from_logits(logits, d->model.n_vocab, req, out);
        free(logits);
        return st;
    }
    const double t0 = cq_clock_seconds();
    if (s->cuda && n > 1 && !d->batch_prefill) { /* a prefill alone, as cq_decoder_eval */
        pthread_mutex_lock(&d->lock);
        const double t1 = cq_clock_seconds();
        st = cq_cuda_eval_top(s->cuda, tokens, n, s->pos, req, out, err);
        pthread_mutex_unlock(&d->lock);
        seq_time(s, true, t1 - t0, cq_clock_seconds() - t1);
        if (!st) s->pos += (int32_t)n;
        if (!st) {
            pthread_mutex_lock(&d->batch_mu);
            d->stats.prompt_forwards++;
            pthread_mutex_unlock(&d->batch_mu);
        }
        return st;
    }
    step_req r = {s, tokens, n, 0, *req, out, CQ_OK, {0}, false, 0, t0, NULL};
    pthread_mutex_lock(&d->batch_mu);
    if (d->queue_tail) d->queue_tail->next = &r;
    else d->queue_head = &r;
    d->queue_tail = &r;
    while (!r.done) {
        if (!d->batch_busy) run_queued(d);
        else pthread_cond_wait(&d->batch_cv, &d->batch_mu);
    }
    pthread_mutex_unlock(&d->batch_mu);
    seq_time(s, n > 1, r.ended - t0 - r.run, r.run);
    if (r.st && err) *err = r.err;
    return r.st;
}

void cq_decoder_get_stats(cq_decoder *d, cq_decoder_stats *out) {
    pthread_mutex_lock(&d->batch_mu);
    *out = d->stats;
    pthread_mutex_unlock(&d->batch_mu);
}

/* A call of cq_decoder_score_prompts into the rerank phases. */
static void rerank_time(cq_decoder *d, double wait, double run) {
    pthread_mutex_lock(&d->batch_mu);
    cq_lat_hist_add(&d->stats.phase[CQ_DECODER_RERANK_WAIT], wait);
    cq_lat_hist_add(&d->stats.phase[CQ_DECODER_RERANK_RUN], run);
    pthread_mutex_unlock(&d->batch_mu);
}

/* Packed prompts on CUDA: at most this many tokens a pass (the flat KV cache of every layer: 36 KB a token for the
 * 270M model, 288 MB here), unless one prompt alone is longer. */
#define PACK_TOKENS 8192

static cq_status score_packed(cq_decoder *d, const int32_t *const *prompts, const size_t *lens, size_t n,
                              const int32_t *ids, size_t n_ids, float *out, uint64_t *reused, cq_err *err) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += lens[i];
    int32_t *tokens = malloc(total * sizeof *tokens), *starts = malloc((n + 1) * sizeof *starts);
    cq_status st = tokens && starts ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !st && i < n;) {
        size_t j = i, have = 0; /* prompts [i, j) in this pass */
        starts[0] = 0;
        while (j < n && (j == i || have + lens[j] <= PACK_TOKENS)) {
            memcpy(tokens + have, prompts[j], lens[j] * sizeof *tokens);
            have += lens[j++];
            starts[j - i] = (int32_t)have;
        }
        if ((int32_t)have > d->pack_tokens) {
            if (d->pack) count_seq(d, -(int64_t)cq_cuda_seq_kv_bytes(d->pack), -1);
            cq_cuda_seq_free(d->pack);
            d->pack = NULL, d->pack_tokens = 0;
            const int32_t cap = (int32_t)have > PACK_TOKENS ? (int32_t)have : PACK_TOKENS;
            if ((st = cq_cuda_seq_new_packed(d->cuda, cap, &d->pack, err))) break;
            count_seq(d, (int64_t)cq_cuda_seq_kv_bytes(d->pack), 1);
            d->pack_tokens = cap;
        }
        int64_t shared = 0; /* prefix reuse: prompts of a pass sharing their first tokens run them once */
        st = cq_cuda_score_packed(d->pack, tokens, starts, j - i, ids, (int)n_ids,
                                  d->prefix_reuse ? CQ_CUDA_SHARE_MIN : 0, &shared, out + i * n_ids, err);
        *reused += (uint64_t)shared;
        i = j;
    }
    free(tokens), free(starts);
    return st;
}

cq_status cq_decoder_score_prompts(cq_decoder *d, const int32_t *const *prompts, const size_t *lens, size_t n,
                                   const int32_t *ids, size_t n_ids, float *out, cq_err *err) {
    const int32_t V = d->model.n_vocab;
    if (n_ids < 1 || n_ids > CQ_DECODER_SCORE_MAX_IDS)
        return cq_err_set(err, CQ_ERR_INVALID, "decoder: %zu ids to score (1 to %d)", n_ids, CQ_DECODER_SCORE_MAX_IDS);
    for (size_t k = 0; k < n_ids; k++)
        if (ids[k] < 0 || ids[k] >= V) return cq_err_set(err, CQ_ERR_INVALID, "decoder: token id %d out of range", ids[k]);
    for (size_t i = 0; i < n; i++) {
        if (lens[i] < 1 || lens[i] > (size_t)d->model.context_length)
            return cq_err_set(err, CQ_ERR_INVALID, "decoder: prompt %zu has %zu tokens (1 to %d)", i, lens[i],
                              d->model.context_length);
        for (size_t t = 0; t < lens[i]; t++)
            if (prompts[i][t] < 0 || prompts[i][t] >= V)
                return cq_err_set(err, CQ_ERR_INVALID, "decoder: token id %d out of range", prompts[i][t]);
    }
    if (!n) return CQ_OK;
    const double t0 = cq_clock_seconds();
    score_req r = {.prompts = prompts, .lens = lens, .n = n, .ids = ids, .n_ids = n_ids, .out = out};
    pthread_mutex_lock(&d->batch_mu);
    d->stats.score_calls++;
    if (d->score_tail) d->score_tail->next = &r;
    else d->score_head = &r;
    d->score_tail = &r;
    while (!r.done) {
        if (!d->batch_busy) run_queued(d);
        else pthread_cond_wait(&d->batch_cv, &d->batch_mu);
    }
    pthread_mutex_unlock(&d->batch_mu);
    rerank_time(d, r.ended - t0 - r.run, r.run);
    if (r.st && err) *err = r.err;
    return r.st;
}
