/* The encoder driver: cuts sequences into blocks the backend runs, carries states across blocks, and finishes the
 * pooled vectors. The same code drives every backend, so they differ only inside cq_ssm_block. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ssm/ssm_internal.h"

struct cq_ssm_encoder {
    const cq_ssm_model *m;
    cq_ssm_backend backend;
    cq_ssm_cpu *cpu;
    cq_ssm_cuda *cuda;
    size_t block_tokens; /* a block's target size; a bidirectional segment longer than this gets a block alone */
};

cq_status cq_ssm_encoder_new(const cq_ssm_model *m, cq_ssm_backend backend, int n_threads, cq_ssm_encoder **out,
                             cq_err *err) {
    *out = NULL;
    cq_ssm_encoder *e = calloc(1, sizeof *e);
    if (!e) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    e->m = m;
    e->backend = backend;
    cq_status rc = CQ_OK;
    switch (backend) {
    case CQ_SSM_BACKEND_REF:
        e->block_tokens = 1024;
        break;
    case CQ_SSM_BACKEND_CPU:
        e->block_tokens = 1024;
        if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
            rc = cq_err_set(err, CQ_ERR_UNSUPPORTED, "this CPU lacks AVX2/FMA: use the reference SSM backend");
        else
            rc = cq_ssm_cpu_new(m, n_threads, &e->cpu, err);
        break;
    case CQ_SSM_BACKEND_CUDA:
        rc = cq_ssm_cuda_new(m, &e->cuda, err);
        if (!rc) e->block_tokens = cq_ssm_cuda_block_tokens(e->cuda);
        break;
    default:
        rc = cq_err_set(err, CQ_ERR_INVALID, "unknown SSM backend %d", (int)backend);
    }
    if (rc) {
        cq_ssm_encoder_free(e);
        return rc;
    }
    *out = e;
    return CQ_OK;
}

void cq_ssm_encoder_free(cq_ssm_encoder *e) {
    if (!e) return;
    cq_ssm_cpu_free(e->cpu);
    cq_ssm_cuda_free(e->cuda);
    free(e);
}

cq_ssm_backend cq_ssm_encoder_backend(const cq_ssm_encoder *e) { return e->backend; }

const char *cq_ssm_backend_name(cq_ssm_backend b) {
    switch (b) {
    case CQ_SSM_BACKEND_CUDA: return "cuda";
    case CQ_SSM_BACKEND_CPU: return "cpu";
    default: return "reference";
    }
}

cq_ssm_cuda *cq_ssm_encoder_cuda(cq_ssm_encoder *e) { return e->cuda; }

static cq_status validate_seq(const cq_ssm_model *m, const cq_ssm_seq *s, size_t i, cq_err *err) {
    if (s->n_tokens && (!s->tokens || !s->segment_ends || !s->n_segments || !s->vectors))
        return cq_err_set(err, CQ_ERR_INVALID, "sequence %zu: tokens, segments and vectors are required", i);
    if (!s->n_tokens && s->n_segments)
        return cq_err_set(err, CQ_ERR_INVALID, "sequence %zu: segments without tokens", i);
    if (s->state && s->state->fingerprint != m->fingerprint)
        return cq_err_set(err, CQ_ERR_INVALID, "sequence %zu: state belongs to another model", i);
    for (size_t t = 0; t < s->n_tokens; t++)
        if (s->tokens[t] < 0 || s->tokens[t] >= m->cfg.vocab_size)
            return cq_err_set(err, CQ_ERR_INVALID, "sequence %zu: token %zu is %d, outside the vocabulary", i, t,
                              (int)s->tokens[t]);
    if (s->doc_vector && !m->doc_w)
        return cq_err_set(err, CQ_ERR_INVALID, "sequence %zu: a document vector needs a document head "
                          "(doc_head.safetensors beside the weights)", i);
    if (s->doc_vector && s->state && s->state->n_tokens)
        return cq_err_set(err, CQ_ERR_INVALID, "sequence %zu: a document vector is read from the document's start; "
                          "this state has read %lld tokens", i, (long long)s->state->n_tokens);
    for (size_t k = 0; k < s->n_segments; k++)
        if (s->segment_ends[k] <= (k ? s->segment_ends[k - 1] : 0) || s->segment_ends[k] > s->n_tokens)
            return cq_err_set(err, CQ_ERR_INVALID, "sequence %zu: segment %zu ends at %u, not after the previous "
                              "end and within %zu tokens", i, k, s->segment_ends[k], s->n_tokens);
    if (s->n_segments && s->segment_ends[s->n_segments - 1] != s->n_tokens)
        return cq_err_set(err, CQ_ERR_INVALID, "sequence %zu: the last segment must end at token %zu", i,
                          s->n_tokens);
    return CQ_OK;
}

/* What the driver remembers about each piece of a block, to finish vectors after the backend has run. */
typedef struct {
    size_t seq, seg;
    int ends_segment;
    size_t to; /* where the piece ends in its sequence */
} piece_info;

typedef struct {
    size_t seq, from, to; /* tokens [from, to) of sequence seq */
    cq_ssm_state *state;
} chunk_info;

/* A growable block under construction. */
typedef struct {
    int32_t *tokens;
    size_t n_tokens, cap_tokens;
    chunk_info *chunks;
    size_t n_chunks, cap_chunks;
    piece_info *pieces;
    size_t *piece_off;
    size_t n_pieces, cap_pieces, cap_piece_off;
    float *pool_mean, *pool_last, *outputs, *piece_sum, *piece_last;
    size_t cap_pool_mean, cap_pool_last, cap_outputs, cap_piece_sum, cap_piece_last;
    int want_outputs, want_doc;
} block_build;

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return 0;
    *p = q;
    *cap = n;
    return 1;
}

typedef struct {
    const cq_ssm_model *m;
    float *acc;   /* running sum of pool_mean over the open segment's pieces (d_embed) */
    size_t *doc_end;  /* per sequence: where its document window ends (0: no document vector) */
    double *doc_acc;  /* per sequence: the sum of its window's outputs so far (d_model) */
} finisher;

/* Where sequence s's document window ends: its first segments while they end within window tokens, at least one
 * (train.py's doc_prefix over whole clauses); 0 without segments. */
static size_t doc_window_end(const cq_ssm_seq *s, int window) {
    if (!s->n_segments) return 0;
    size_t k = 1;
    while (k < s->n_segments && s->segment_ends[k] <= (size_t)window) k++;
    return s->segment_ends[k - 1];
}

/* v = normalize(W · [sum / n; last] + b), W (E, 2 d) */
static void doc_finish(const cq_ssm_model *m, const double *sum, size_t n, const float *last, float *v) {
    const size_t E = (size_t)m->cfg.d_embed, dm = (size_t)m->cfg.d_model;
    double norm2 = 0;
    for (size_t r = 0; r < E; r++) {
        const float *w = m->doc_w + r * 2 * dm;
        double a = 0;
        for (size_t c = 0; c < dm; c++) a += (double)w[c] * (sum[c] / (double)n) + (double)w[dm + c] * last[c];
        v[r] = (float)(a + m->doc_b[r]);
        norm2 += (double)v[r] * v[r];
    }
    float inv = norm2 > 0 ? (float)(1.0 / sqrt(norm2)) : 0.0f;
    for (size_t r = 0; r < E; r++) v[r] *= inv;
}

static cq_status run_block(cq_ssm_encoder *e, block_build *bb, cq_ssm_seq *seqs, finisher *fin, cq_err *err) {
    const cq_ssm_model *m = e->m;
    const size_t E = (size_t)m->cfg.d_embed, dm = (size_t)m->cfg.d_model;
    if (!bb->n_chunks) return CQ_OK;
    size_t *seq_off = malloc((bb->n_chunks + 1) * sizeof *seq_off);
    cq_ssm_state **states = malloc(bb->n_chunks * sizeof *states);
    if (!seq_off || !states || !grow((void **)&bb->pool_mean, &bb->cap_pool_mean, bb->n_pieces * E, sizeof(float)) ||
        !grow((void **)&bb->pool_last, &bb->cap_pool_last, bb->n_pieces * E, sizeof(float)) ||
        (bb->want_outputs && !grow((void **)&bb->outputs, &bb->cap_outputs, bb->n_tokens * dm, sizeof(float))) ||
        (bb->want_doc && (!grow((void **)&bb->piece_sum, &bb->cap_piece_sum, bb->n_pieces * dm, sizeof(float)) ||
                          !grow((void **)&bb->piece_last, &bb->cap_piece_last, bb->n_pieces * dm, sizeof(float))))) {
        free(seq_off);
        free(states);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory for a block of %zu tokens", bb->n_tokens);
    }
    seq_off[0] = 0;
    for (size_t i = 0; i < bb->n_chunks; i++) {
        seq_off[i + 1] = seq_off[i] + (bb->chunks[i].to - bb->chunks[i].from);
        states[i] = bb->chunks[i].state;
    }
    cq_ssm_block b = {
        .tokens = bb->tokens, .n_tokens = bb->n_tokens, .n_seq = bb->n_chunks, .seq_off = seq_off,
        .states = states, .n_pieces = bb->n_pieces, .piece_off = bb->piece_off, .pool_mean = bb->pool_mean,
        .pool_last = bb->pool_last, .outputs = bb->want_outputs ? bb->outputs : NULL,
        .piece_sum = bb->want_doc ? bb->piece_sum : NULL, .piece_last = bb->want_doc ? bb->piece_last : NULL,
    };
    cq_status rc;
    switch (e->backend) {
    case CQ_SSM_BACKEND_REF: rc = cq_ssm_ref_forward(m, &b, err); break;
    case CQ_SSM_BACKEND_CPU: rc = cq_ssm_cpu_forward(e->cpu, &b, err); break;
    default: rc = cq_ssm_cuda_forward(e->cuda, &b, err); break;
    }
    if (!rc) {
        for (size_t i = 0; i < bb->n_chunks; i++) {
            const chunk_info *c = &bb->chunks[i];
            if (c->state) c->state->n_tokens += (int64_t)(c->to - c->from);
            if (bb->want_outputs && seqs[c->seq].outputs)
                memcpy(seqs[c->seq].outputs + c->from * dm, bb->outputs + seq_off[i] * dm,
                       (c->to - c->from) * dm * sizeof(float));
        }
        for (size_t p = 0; bb->want_doc && p < bb->n_pieces; p++) { /* document vectors */
            const piece_info *pi = &bb->pieces[p];
            const size_t end = fin->doc_end[pi->seq];
            if (!end || pi->to > end) continue;
            double *acc = fin->doc_acc + pi->seq * dm;
            for (size_t c = 0; c < dm; c++) acc[c] += bb->piece_sum[p * dm + c];
            if (pi->to == end) doc_finish(m, acc, end, bb->piece_last + p * dm, seqs[pi->seq].doc_vector);
        }
        for (size_t p = 0; p < bb->n_pieces; p++) {
            for (size_t r = 0; r < E; r++) fin->acc[r] += bb->pool_mean[p * E + r];
            const piece_info *pi = &bb->pieces[p];
            if (!pi->ends_segment) continue;
            const cq_ssm_seq *s = &seqs[pi->seq];
            size_t start = pi->seg ? s->segment_ends[pi->seg - 1] : 0;
            float inv_n = 1.0f / (float)(s->segment_ends[pi->seg] - start);
            float *v = s->vectors + pi->seg * E;
            double norm2 = 0;
            for (size_t r = 0; r < E; r++) {
                v[r] = fin->acc[r] * inv_n + bb->pool_last[p * E + r] + m->pool_b[r];
                norm2 += (double)v[r] * v[r];
                fin->acc[r] = 0;
            }
            float inv = norm2 > 0 ? (float)(1.0 / sqrt(norm2)) : 0.0f;
            for (size_t r = 0; r < E; r++) v[r] *= inv;
        }
    }
    bb->n_tokens = bb->n_chunks = bb->n_pieces = 0;
    free(seq_off);
    free(states);
    return rc;
}

/* Adds tokens [from, to) of sequence q to the block, with its pieces. */
static cq_status add_chunk(block_build *bb, const cq_ssm_seq *s, size_t q, size_t from, size_t to,
                           cq_ssm_state *state, cq_err *err) {
    size_t n = to - from;
    if (!grow((void **)&bb->tokens, &bb->cap_tokens, bb->n_tokens + n, sizeof *bb->tokens) ||
        !grow((void **)&bb->chunks, &bb->cap_chunks, bb->n_chunks + 1, sizeof *bb->chunks))
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    memcpy(bb->tokens + bb->n_tokens, s->tokens + from, n * sizeof *bb->tokens);
    bb->chunks[bb->n_chunks++] = (chunk_info){.seq = q, .from = from, .to = to, .state = state};
    /* the segments that overlap [from, to) */
    size_t lo = 0, hi = s->n_segments;
    while (lo < hi) { /* first segment ending after from */
        size_t mid = (lo + hi) / 2;
        if (s->segment_ends[mid] <= from)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t k = lo; k < s->n_segments; k++) {
        size_t seg_start = k ? s->segment_ends[k - 1] : 0, seg_end = s->segment_ends[k];
        if (seg_start >= to) break;
        size_t b = seg_end < to ? seg_end : to;
        if (!grow((void **)&bb->pieces, &bb->cap_pieces, bb->n_pieces + 1, sizeof *bb->pieces) ||
            !grow((void **)&bb->piece_off, &bb->cap_piece_off, bb->n_pieces + 2, sizeof *bb->piece_off))
            return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        if (!bb->n_pieces) bb->piece_off[0] = 0;
        bb->pieces[bb->n_pieces] = (piece_info){.seq = q, .seg = k, .ends_segment = seg_end <= to, .to = b};
        bb->piece_off[bb->n_pieces + 1] = bb->n_tokens + (b - from);
        bb->n_pieces++;
    }
    bb->n_tokens += n;
    return CQ_OK;
}

cq_status cq_ssm_encode_tokens(cq_ssm_encoder *e, cq_ssm_seq *seqs, size_t n_seqs, cq_err *err) {
    const cq_ssm_model *m = e->m;
    for (size_t i = 0; i < n_seqs; i++) {
        cq_status rc = validate_seq(m, &seqs[i], i, err);
        if (rc) return rc;
    }
    block_build bb = {0};
    finisher fin = {.m = m, .acc = calloc((size_t)m->cfg.d_embed, sizeof(float))};
    cq_ssm_state **temp = calloc(n_seqs + 1, sizeof *temp);
    cq_status rc = CQ_OK;
    if (!fin.acc || !temp) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n_seqs && !rc; i++) {
        bb.want_outputs |= seqs[i].outputs != NULL;
        bb.want_doc |= seqs[i].doc_vector != NULL;
    }
    if (!rc && bb.want_doc) {
        fin.doc_end = calloc(n_seqs, sizeof *fin.doc_end);
        fin.doc_acc = calloc(n_seqs * (size_t)m->cfg.d_model, sizeof *fin.doc_acc);
        if (!fin.doc_end || !fin.doc_acc) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        for (size_t i = 0; !rc && i < n_seqs; i++)
            if (seqs[i].doc_vector) {
                fin.doc_end[i] = doc_window_end(&seqs[i], m->doc_window);
                memset(seqs[i].doc_vector, 0, (size_t)m->cfg.d_embed * sizeof(float));
            }
    }
    const size_t cap = e->block_tokens;
    for (size_t q = 0; q < n_seqs && !rc; q++) {
        cq_ssm_seq *s = &seqs[q];
        size_t pos = 0;
        while (pos < s->n_tokens && !rc) {
            size_t room = cap > bb.n_tokens ? cap - bb.n_tokens : 0;
            if (!room) {
                rc = run_block(e, &bb, seqs, &fin, err);
                continue;
            }
            size_t end = pos + room < s->n_tokens ? pos + room : s->n_tokens;
            if (m->cfg.bidirectional && end < s->n_tokens) {
                /* reversed scans are segment-local: cut only at segment ends */
                size_t k = s->n_segments;
                while (k > 0 && s->segment_ends[k - 1] > end) k--;
                size_t cut = k ? s->segment_ends[k - 1] : 0;
                if (cut <= pos) {
                    if (bb.n_tokens) {
                        rc = run_block(e, &bb, seqs, &fin, err);
                        continue;
                    }
                    k = 0; /* one segment longer than a block: it gets a block alone */
                    while (s->segment_ends[k] <= pos) k++;
                    cut = s->segment_ends[k];
                }
                end = cut;
            }
            cq_ssm_state *st = s->state;
            if (!st && !(pos == 0 && end == s->n_tokens)) { /* split without a state of its own: borrow one */
                if (!temp[q]) rc = cq_ssm_state_new(m, &temp[q], err);
                st = temp[q];
            }
            if (!rc) rc = add_chunk(&bb, s, q, pos, end, st, err);
            pos = end;
        }
    }
    if (!rc) rc = run_block(e, &bb, seqs, &fin, err);
    for (size_t i = 0; temp && i < n_seqs; i++) cq_ssm_state_free(temp[i]);
    free(temp);
    free(fin.acc);
    free(fin.doc_end);
    free(fin.doc_acc);
    free(bb.piece_sum);
    free(bb.piece_last);
    free(bb.tokens);
    free(bb.chunks);
    free(bb.pieces);
    free(bb.piece_off);
    free(bb.pool_mean);
    free(bb.pool_last);
    free(bb.outputs);
    return rc;
}

/* ---- text level ---- */

/* Appends marker + the tokens of text to (*ids, *n), growing the buffer: the built-in tokenizer, or the model's
 * external vocabulary. */
static cq_status append_text(const cq_ssm_model *m, int32_t **ids, size_t *n, size_t *cap, int32_t marker,
                             const char *text, size_t len, cq_err *err) {
    if (m->vocab) {
        int32_t *v = NULL;
        size_t nv = 0;
        cq_status rc = m->vocab->tokenize(m->vocab->ctx, text, len, &v, &nv, err);
        if (!rc && !grow((void **)ids, cap, *n + nv + 1, sizeof **ids))
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        for (size_t i = 0; !rc && i < nv; i++)
            if (v[i] < 0 || v[i] >= m->cfg.vocab_size)
                rc = cq_err_set(err, CQ_ERR_INTERNAL, "the %s tokenizer gave id %d", m->cfg.tokenizer, (int)v[i]);
        if (!rc) {
            (*ids)[(*n)++] = marker;
            if (nv) memcpy(*ids + *n, v, nv * sizeof *v);
            *n += nv;
        }
        free(v);
        return rc;
    }
    /* a UTF-8 text of len bytes has at most len tokens */
    if (!grow((void **)ids, cap, *n + len + 2, sizeof **ids)) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    (*ids)[(*n)++] = marker;
    *n += cq_ssm_tokenize(text, len, *ids + *n, *cap - *n);
    return CQ_OK;
}

cq_status cq_ssm_document_tokens(const cq_ssm_model *m, bool fresh, const char *const *clauses, const size_t *lens,
                                 size_t n_clauses, int32_t **ids, size_t *n_ids, uint32_t *ends, cq_err *err) {
    *ids = NULL;
    *n_ids = 0;
    size_t n = 0, cap = 0;
    cq_status rc = CQ_OK;
    if (fresh) {
        if (!grow((void **)ids, &cap, 1, sizeof **ids)) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        else (*ids)[n++] = CQ_SSM_TOK_BOS;
    }
    for (size_t i = 0; i < n_clauses && !rc; i++) {
        rc = append_text(m, ids, &n, &cap, CQ_SSM_TOK_SEP, clauses[i], lens[i], err);
        if (!rc && n > UINT32_MAX) rc = cq_err_set(err, CQ_ERR_INVALID, "document too long for one call");
        if (!rc) ends[i] = (uint32_t)n;
    }
    if (rc) {
        free(*ids);
        *ids = NULL;
        return rc;
    }
    *n_ids = n;
    return CQ_OK;
}

cq_status cq_ssm_encode_document(cq_ssm_encoder *e, cq_ssm_state *state, const char *const *clauses,
                                 const size_t *lens, size_t n_clauses, float *vectors, cq_err *err) {
    return cq_ssm_encode_document_vec(e, state, clauses, lens, n_clauses, vectors, NULL, err);
}

cq_status cq_ssm_encode_document_vec(cq_ssm_encoder *e, cq_ssm_state *state, const char *const *clauses,
                                     const size_t *lens, size_t n_clauses, float *vectors, float *doc_vector,
                                     cq_err *err) {
    if (!state) return cq_err_set(err, CQ_ERR_INVALID, "encode_document needs a state");
    if (!n_clauses) {
        if (doc_vector) memset(doc_vector, 0, (size_t)e->m->cfg.d_embed * sizeof(float));
        return CQ_OK;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    uint32_t *ends = malloc(n_clauses * sizeof *ends);
    cq_status rc = ends ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc) rc = cq_ssm_document_tokens(e->m, state->n_tokens == 0, clauses, lens, n_clauses, &ids, &n, ends, err);
    if (!rc) {
        cq_ssm_seq s = {.tokens = ids, .n_tokens = n, .segment_ends = ends, .n_segments = n_clauses,
                        .state = state, .vectors = vectors, .doc_vector = doc_vector};
        rc = cq_ssm_encode_tokens(e, &s, 1, err);
    }
    free(ids);
    free(ends);
    return rc;
}

cq_status cq_ssm_encode_queries(cq_ssm_encoder *e, const char *const *questions, const size_t *lens, size_t n,
                                float *vectors, cq_err *err) {
    if (!n) return CQ_OK;
    int32_t *ids = NULL;
    size_t n_ids = 0, cap = 0;
    size_t *starts = malloc((n + 1) * sizeof *starts);
    uint32_t *ends = malloc(n * sizeof *ends);
    cq_ssm_seq *seqs = calloc(n, sizeof *seqs);
    cq_status rc = starts && ends && seqs ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && !rc; i++) {
        starts[i] = n_ids;
        rc = append_text(e->m, &ids, &n_ids, &cap, CQ_SSM_TOK_QRY, questions[i], lens[i], err);
        if (!rc && n_ids - starts[i] > UINT32_MAX) rc = cq_err_set(err, CQ_ERR_INVALID, "question too long");
    }
    if (!rc) {
        for (size_t i = 0; i < n; i++) {
            size_t len = (i + 1 < n ? starts[i + 1] : n_ids) - starts[i];
            ends[i] = (uint32_t)len;
            seqs[i] = (cq_ssm_seq){.tokens = ids + starts[i], .n_tokens = len, .segment_ends = &ends[i],
                                   .n_segments = 1, .vectors = vectors + i * (size_t)e->m->cfg.d_embed};
        }
        rc = cq_ssm_encode_tokens(e, seqs, n, err);
    }
    free(ids);
    free(starts);
    free(ends);
    free(seqs);
    return rc;
}
