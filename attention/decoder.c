#include "attention/decoder.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/forward_cpu.h"
#include "attention/forward_cuda.h"
#include "attention/lora.h"
#include "attention/model.h"
#include "core/log.h"

#define SEQ_POOL 64    /* CUDA sequences kept for reuse at most */
#define SEQ_ROUND 512  /* their capacities are rounded up to a multiple of this */

_Static_assert(CQ_DECODER_BATCH_MAX <= CQ_CUDA_DECODE_BATCH_MAX, "a decoder batch must fit a CUDA batch");

/* A single-token step waiting for the batcher (cq_decoder_eval_top). */
typedef struct step_req {
    cq_decoder_seq *s;
    int32_t token;
    cq_top_request req;
    cq_top *out;
    cq_status st;
    cq_err err;
    bool done;
    struct step_req *next;
} step_req;

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
};

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
    snprintf(i->architecture, sizeof i->architecture, "gemma3");
    snprintf(i->name, sizeof i->name, "%s", m->name);
    i->n_vocab = m->n_vocab, i->n_embd = m->n_embd, i->n_layer = m->n_layer, i->n_head = m->n_head;
    i->n_head_kv = m->n_head_kv, i->head_dim = m->head_dim, i->n_ff = m->n_ff;
    i->context_length = m->context_length, i->sliding_window = m->window, i->n_global_layers = m->n_global;
    i->device = d->cuda ? CQ_DEVICE_CUDA : CQ_DEVICE_CPU;
    *out = d;
    return CQ_OK;
}

void cq_decoder_close(cq_decoder *d) {
    if (!d) return;
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
    pthread_mutex_lock(&s->d->lock);
    cq_status st = s->cuda ? cq_cuda_eval(s->cuda, tokens, n, s->pos, logits, all_logits, err)
                           : cq_cpu_eval(s->cpu, tokens, n, s->pos, logits, all_logits, err);
    pthread_mutex_unlock(&s->d->lock);
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
    pthread_mutex_lock(&s->d->lock);
    cq_status st = cq_cuda_decode_greedy(s->cuda, token, s->pos, next, err);
    pthread_mutex_unlock(&s->d->lock);
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

/* The leader's turn: takes up to CQ_DECODER_BATCH_MAX queued steps (batch_mu held on entry and exit, released while
 * the GPU runs them), runs them as one forward and marks each done with its outcome. */
static void run_queued(cq_decoder *d) {
    step_req *taken[CQ_DECODER_BATCH_MAX];
    cq_cuda_seq *seqs[CQ_DECODER_BATCH_MAX];
    int32_t tokens[CQ_DECODER_BATCH_MAX], pos[CQ_DECODER_BATCH_MAX];
    cq_top_request reqs[CQ_DECODER_BATCH_MAX];
    cq_top *outs = d->batch_out;
    int B = 0;
    while (d->queue_head && B < CQ_DECODER_BATCH_MAX) {
        step_req *r = d->queue_head;
        d->queue_head = r->next;
        taken[B] = r, seqs[B] = r->s->cuda, tokens[B] = r->token, pos[B] = r->s->pos, reqs[B] = r->req;
        B++;
    }
    if (!d->queue_head) d->queue_tail = NULL;
    d->batch_busy = true;
    pthread_mutex_unlock(&d->batch_mu);
    cq_err e = {0};
    pthread_mutex_lock(&d->lock);
    cq_status st = cq_cuda_decode_batch(seqs, tokens, pos, B, reqs, outs, &e);
    pthread_mutex_unlock(&d->lock);
    pthread_mutex_lock(&d->batch_mu);
    for (int i = 0; i < B; i++) {
        step_req *r = taken[i];
        r->st = st;
        if (st) r->err = e;
        else {
            *r->out = outs[i];
            r->s->pos++;
        }
        r->done = true;
    }
    d->stats.steps += (uint64_t)B;
    d->stats.forwards++;
    d->stats.batch_hist[batch_bucket(B)]++;
    d->batch_busy = false;
    pthread_cond_broadcast(&d->batch_cv);
}

cq_status cq_decoder_eval_top(cq_decoder_seq *s, const int32_t *tokens, size_t n, const cq_top_request *req,
                              cq_top *out, cq_err *err) {
    cq_decoder *d = s->d;
    cq_status st = check_top(s, tokens, n, req, err);
    if (st) return st;
    if (!s->cuda) {
        float *logits = malloc((size_t)d->model.n_vocab * sizeof *logits);
        if (!logits) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        if (!(st = cq_decoder_eval(s, tokens, n, logits, false, err))) cq_top_from_logits(logits, d->model.n_vocab, req, out);
        free(logits);
        if (!st && n == 1) {
            pthread_mutex_lock(&d->batch_mu);
            d->stats.steps++, d->stats.forwards++, d->stats.batch_hist[0]++;
            pthread_mutex_unlock(&d->batch_mu);
        }
        return st;
    }
    if (n > 1) { /* a prefill: alone, as cq_decoder_eval */
        pthread_mutex_lock(&d->lock);
        st = cq_cuda_eval_top(s->cuda, tokens, n, s->pos, req, out, err);
        pthread_mutex_unlock(&d->lock);
        if (!st) s->pos += (int32_t)n;
        return st;
    }
    step_req r = {s, tokens[0], *req, out, CQ_OK, {0}, false, NULL};
    pthread_mutex_lock(&d->batch_mu);
    if (d->queue_tail) d->queue_tail->next = &r;
    else d->queue_head = &r;
    d->queue_tail = &r;
    while (!r.done) {
        if (!d->batch_busy) run_queued(d);
        else pthread_cond_wait(&d->batch_cv, &d->batch_mu);
    }
    pthread_mutex_unlock(&d->batch_mu);
    if (r.st && err) *err = r.err;
    return r.st;
}

void cq_decoder_get_stats(cq_decoder *d, cq_decoder_stats *out) {
    pthread_mutex_lock(&d->batch_mu);
    *out = d->stats;
    pthread_mutex_unlock(&d->batch_mu);
}

/* Packed prompts on CUDA: at most this many tokens a pass (the flat KV cache of every layer: 36 KB a token for the
 * 270M model, 288 MB here), unless one prompt alone is longer. */
#define PACK_TOKENS 8192

static cq_status score_packed(cq_decoder *d, const int32_t *const *prompts, const size_t *lens, size_t n,
                              const int32_t *ids, size_t n_ids, float *out, cq_err *err) {
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
        st = cq_cuda_score_packed(d->pack, tokens, starts, j - i, ids, (int)n_ids, out + i * n_ids, err);
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
    size_t longest = 0;
    for (size_t k = 0; k < n_ids; k++)
        if (ids[k] < 0 || ids[k] >= V) return cq_err_set(err, CQ_ERR_INVALID, "decoder: token id %d out of range", ids[k]);
    for (size_t i = 0; i < n; i++) {
        if (lens[i] < 1 || lens[i] > (size_t)d->model.context_length)
            return cq_err_set(err, CQ_ERR_INVALID, "decoder: prompt %zu has %zu tokens (1 to %d)", i, lens[i],
                              d->model.context_length);
        for (size_t t = 0; t < lens[i]; t++)
            if (prompts[i][t] < 0 || prompts[i][t] >= V)
                return cq_err_set(err, CQ_ERR_INVALID, "decoder: token id %d out of range", prompts[i][t]);
        if (lens[i] > longest) longest = lens[i];
    }
    if (!n) return CQ_OK;
    if (d->cuda) {
        pthread_mutex_lock(&d->lock);
        cq_status st = score_packed(d, prompts, lens, n, ids, n_ids, out, err);
        pthread_mutex_unlock(&d->lock);
        return st;
    }
    cq_decoder_seq *s;
    cq_status st = cq_decoder_seq_new(d, (int32_t)longest, &s, err);
    float *logits = st ? NULL : malloc((size_t)V * sizeof *logits);
    if (!st && !logits) st = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !st && i < n; i++) {
        cq_decoder_seq_reset(s);
        if (!(st = cq_decoder_eval(s, prompts[i], lens[i], logits, false, err)))
            for (size_t k = 0; k < n_ids; k++) out[i * n_ids + k] = logits[ids[k]];
    }
    free(logits);
    cq_decoder_seq_free(s);
    return st;
}
