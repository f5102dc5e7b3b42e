#include "decoder/forward_cpu.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "decoder/cpu_kernels.h"
#include "decoder/lora.h"
#include "decoder/quant.h"

/* Rows dequantized at once for a multi-token product: 2 groups of the 6-row micro-kernel. */
#define ROW_TILE 12
/* Rows per task of the GeGLU product (gate and up rows of one task are combined by that task). */
#define GEGLU_ROWS 48
/* A prompt's attention (prompt_attention): keys per block of its online softmax (so that a chunk of a long prompt
 * takes several, and the tests' 613-token prompt checks the blocks' merge), keys per task of the score product,
 * queries per task of the rest. */
#define PROMPT_KEYS 256
#define PROMPT_KEY_ROWS 48
#define PROMPT_QUERY_ROWS 24

/* An adapter as the CPU runs it (decoder/lora.h), as a low-rank side product next to the quantized weights:
 * merging W + s B A into them would mean requantizing, and the 4-bit grid is coarser than the delta (see
 * docs/PERF.md). The projections of a layer that share an input form a group (q/k/v; o; gate/up; down): u = A x for
 * the group's stacked A factors is one product before the group's own, and each adapted projection adds its rows'
 * term y_r += sum_j u_j s B[r][j] in the task that computes those rows (for gate and up before the GeGLU).
 * Factors in bf16: half the bytes of float for every decode step to read, and rounding far below the weights'. B is
 * kept in tiles of 16 outputs (cpu_kernels.h), so that a task's rows read it front to back: held transposed, a
 * rank-strided walk, it took 4x the time of the A product (perf) for the same bytes. */
enum { GROUP_QKV, GROUP_O, GROUP_GATE_UP, GROUP_DOWN, N_GROUPS };

typedef struct {
    cq_wmat a[N_GROUPS];     /* (adapted projections of the group x rank, in) bf16; data NULL: none in the group */
    uint16_t *bt[CQ_N_PROJ]; /* s B in bf16, in tiles of outputs (cq_k_lowrank_tile), or NULL: not adapted */
    int u_off[CQ_N_PROJ];    /* its rows in its group's u */
} lora_layer;

/* One projection's low-rank term in a product: bt NULL for none. */
typedef struct {
    const uint16_t *bt;
    const float *u; /* (n_tokens, ldu), this projection's rank values first */
    size_t ldu;
} lora_term;

struct cq_cpu_model {
    const cq_gemma *m;  /* &own, or the caller's model when the weights were not copied */
    cq_gemma own;       /* the caller's model with every matrix pointing into `weights` (layers: own array) */
    void *weights;      /* anonymous copy of the weight matrices on huge pages, or NULL */
    size_t weights_map_bytes;
    cq_pool *pool;
    int n_threads;
    size_t max_cols;
    float *tiles;       /* (n_threads, tile_floats): ROW_TILE dequantized rows + GeGLU up rows */
    size_t tile_floats; /* per thread */
    float *xpack;       /* (max_cols, packed width of CQ_CPU_BATCH) the tokens of the current product, k-major */
    cq_i16_block *xq;   /* (max_cols / 32) the token of a decode step's product, quantized to int16 */
    bool exact;         /* decode steps in float too (options.exact, CLAUSEQA_CPU_EXACT); see cq_cpu_eval */
    bool kv_bf16;       /* K and V rounded to bf16 as they are stored (CLAUSEQA_KV_BF16; cq_cpu_model_set_kv_bf16) */
    double *inv_freq[2]; /* (head_dim/2) RoPE frequencies of local [0] and global [1] layers, scaling included */
    lora_layer *lora;    /* (n_layer) the adapter, or NULL */
    int lora_rank;
    float *lora_u;       /* (CQ_CPU_BATCH, 3 rank): a group's u = A x */
};

struct cq_cpu_seq {
    cq_cpu_model *cm;
    int32_t max_tokens;
    /* KV cache per layer: (slots, n_head_kv, head_dim). Local layers: window + CQ_CPU_BATCH slots used as a ring
     * (slot = pos % slots); global layers: one slot per position, grown on demand up to max_tokens. */
    float **k, **v;
    int32_t *slots;
    /* activations of one chunk of T <= CQ_CPU_BATCH tokens */
    float *x;     /* (T, n_embd) residual stream */
    float *xn;    /* (T, n_embd) normed input of a block */
    float *q;     /* (T, n_head*head_dim) */
    float *kn;    /* (T, n_head_kv*head_dim) */
    float *vn;    /* (T, n_head_kv*head_dim) */
    float *att;   /* (T, n_head*head_dim) attention output */
    float *o;     /* (T, n_embd) block output */
    float *ff;    /* (T, n_ff) gelu(gate) * up */
    float *rope;  /* (2 kinds, T, head_dim/2, cos|sin) */
    float *scores; /* (n_threads, n_head, max_tokens) */
    /* a prompt's attention (prompt_attention), one KV head at a time, q = group * CQ_CPU_BATCH queries */
    float *pa_scores; /* (q, PROMPT_KEYS) */
    float *pa_v;      /* (PROMPT_KEYS, head_dim) a block's V rows where the ring wraps */
    float *pa_q;      /* (q, head_dim) the queries of one KV head when the model has several */
    float *pa_max, *pa_sum; /* (q) */
    float *part;   /* (n_threads, n_head, head_dim + 2): a decode step's attention shares (decode_flash_task) */
};

/* ---- ops ----------------------------------------------------------------------------------------------------- */

static void add_into(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

void cq_op_rmsnorm(float *out, const float *x, const float *w, int n, float eps) { cq_k_rmsnorm(out, x, w, n, eps); }

/* cs holds cos and sin of the head_dim/2 angles, interleaved per pair: cs[2i] = cos, cs[2i+1] = sin. */
static void rope_angles(float *cs, int half, int32_t pos, const double *inv_freq) {
    for (int i = 0; i < half; i++) {
        double a = pos * inv_freq[i];
        cs[2 * i] = (float)cos(a);
        cs[2 * i + 1] = (float)sin(a);
    }
}

static void rope_apply(float *x, int half, const float *cs) {
    for (int i = 0; i < half; i++) {
        float c = cs[2 * i], s = cs[2 * i + 1], x0 = x[i], x1 = x[i + half];
        x[i] = x0 * c - x1 * s;
        x[i + half] = x1 * c + x0 * s;
    }
}

static void rope_freqs(double *inv_freq, int head_dim, float base, float freq_scale) {
    for (int i = 0; i < head_dim / 2; i++) inv_freq[i] = pow((double)base, -2.0 * i / head_dim) * freq_scale;
}

void cq_op_rope(float *x, int head_dim, int32_t pos, float base, float freq_scale) {
    int half = head_dim / 2;
    double inv_freq[half];
    float cs[2 * half];
    rope_freqs(inv_freq, head_dim, base, freq_scale);
    rope_angles(cs, half, pos, inv_freq);
    rope_apply(x, half, cs);
}

float cq_op_gelu_tanh(float x) { return cq_k_gelu_tanh(x); }

/* Softmax in place over the n scores of one head: s = softcap * tanh(scale * s / softcap) (no cap when softcap is
 * 0), then exp(s - max) / sum, the sum in double. */
static void softmax_scores(float *sc, int32_t n, float scale, float softcap) {
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        float s = sc[i] * scale;
        if (softcap > 0) s = softcap * tanhf(s / softcap);
        sc[i] = s;
        if (s > mx) mx = s;
    }
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += (sc[i] = expf(sc[i] - mx));
    float inv = (float)(1.0 / sum);
    for (int32_t i = 0; i < n; i++) sc[i] *= inv;
}

/* Softmax attention of n_heads queries (q + h*hd, one KV head) over keys given by up to two contiguous runs of cache
 * slots (a wrapped ring): [first, first + n1) and [0, n - n1). Each K and V row is read once for all the heads;
 * every head's arithmetic is the same as alone. scores: (n_heads, n). out: (n_heads, hd). */
static void attend_runs(const float *q, int n_heads, const float *k, const float *v, size_t stride, int hd,
                        int32_t first, int32_t n1, int32_t n, float scale, float softcap, float *scores, float *out) {
    cq_k_dot_heads(q, n_heads, k + (size_t)first * stride, stride, n1, hd, scores, (size_t)n);
    if (n > n1) cq_k_dot_heads(q, n_heads, k, stride, n - n1, hd, scores + n1, (size_t)n);
    for (int h = 0; h < n_heads; h++) softmax_scores(scores + (size_t)h * n, n, scale, softcap);
    memset(out, 0, (size_t)n_heads * hd * sizeof *out);
    cq_k_axpy_heads(out, (size_t)hd, n_heads, scores, (size_t)n, v + (size_t)first * stride, stride, n1, hd);
    if (n > n1) cq_k_axpy_heads(out, (size_t)hd, n_heads, scores + n1, (size_t)n, v, stride, n - n1, hd);
}

void cq_op_attention(const float *q, const float *k, const float *v, int n_keys, size_t kv_stride, int head_dim,
                     float scale, float softcap, float *scores, float *out) {
    attend_runs(q, 1, k, v, kv_stride, head_dim, 0, n_keys, n_keys, scale, softcap, scores, out);
}

void cq_op_matmul_ref(const cq_wmat *w, const float *x, size_t ldx, int n_tokens, float *y, size_t ldy) {
    float *row = malloc((size_t)w->cols * sizeof *row);
    if (!row) return;
    for (int64_t r = 0; r < w->rows; r++) {
        cq_dequant_row(w->type, (const uint8_t *)w->data + (size_t)r * w->row_bytes, row, (size_t)w->cols);
        for (int t = 0; t < n_tokens; t++) {
            double s = 0;
            for (int64_t kk = 0; kk < w->cols; kk++) s += (double)row[kk] * x[(size_t)t * ldx + kk];
            y[(size_t)t * ldy + r] = (float)s;
        }
    }
    free(row);
}

void cq_op_lora_merge_ref(const cq_wmat *w, const float *a, const float *b, int rank, float scale, float *out) {
    const size_t cols = (size_t)w->cols;
    for (int64_t r = 0; r < w->rows; r++) {
        float *o = out + (size_t)r * cols;
        cq_dequant_row(w->type, (const uint8_t *)w->data + (size_t)r * w->row_bytes, o, cols);
        for (size_t c = 0; c < cols; c++) {
            double d = 0;
            for (int j = 0; j < rank; j++) d += (double)b[(size_t)r * rank + j] * a[(size_t)j * cols + c];
            o[c] += (float)(scale * d);
        }
    }
}

/* ---- matrix products ----------------------------------------------------------------------------------------- */

/* Up to 3 products of the same input (Q, K and V) run as one dispatch: their tasks are numbered one after the
 * other. */
#define MAX_PARTS 3

typedef struct {
    const cq_wmat *w;
    float *y;
    size_t ldy;
    int rows_per_task, first_task;
    lora_term lora;
} matmul_part;

typedef struct {
    matmul_part part[MAX_PARTS];
    int n_parts;
    const cq_wmat *w2; /* GeGLU when set (one part): y = gelu(W x) * (W2 x), both by the task that owns the rows */
    bool silu;         /* ... SwiGLU instead: y = silu(W x) * (W2 x) (the model's ffn_silu) */
    lora_term lora2;   /* W2's adapter term */
    int lora_rank;
    const float *x;    /* (n_tokens, ldx) for one token; else the packed tokens (cols, ldxt) */
    const cq_i16_block *xq; /* one token quantized to int16 (the fast decode product), or NULL */
    const cq_tokens_i16 *xt16; /* several tokens quantized to int16 (a prompt's integer product), or NULL */
    size_t ldxt;
    int n_tokens;
    cq_cpu_model *cm;
} matmul_job;

/* y[t*ldy + (r - col0)] = W[r] . x_t for rows [r0, r1): a dot per row for one token (each weight read once; in
 * integers when the token was quantized), else tiles of rows against the packed tokens: as int16 quants when the
 * tokens were quantized, dequantized to float otherwise. */
static void rows_times_tokens(const matmul_job *j, const cq_wmat *w, int r0, int r1, float *y, size_t ldy, int col0,
                              float *tile) {
    const int k = (int)w->cols;
    const uint8_t *base = w->data;
    if (j->n_tokens == 1 && j->xq) {
        cq_dot_rows_i16(w->type, base + (size_t)r0 * w->row_bytes, w->row_bytes, r1 - r0, j->xq, (size_t)k, y + (r0 - col0));
        return;
    }
    if (j->n_tokens == 1) {
        for (int r = r0; r < r1; r++) y[r - col0] = cq_dot_row(w->type, base + (size_t)r * w->row_bytes, j->x, (size_t)k);
        return;
    }
    if (j->xt16) { /* the tile's room: int16 quants, then per-16 scales, then per-32 mins (cq_rows_i16) */
        cq_rows_i16 t16 = {.q = (int16_t *)tile, .scale = tile + ROW_TILE * (size_t)k / 2};
        t16.min = t16.scale + ROW_TILE * (size_t)k / 16;
        for (int r = r0; r < r1; r += ROW_TILE) {
            int nr = r1 - r < ROW_TILE ? r1 - r : ROW_TILE;
            cq_unpack_rows_i16(w->type, base + (size_t)r * w->row_bytes, w->row_bytes, nr, (size_t)k, &t16);
            cq_k_rows_times_tokens_i16(&t16, j->xt16, y + (r - col0), ldy);
        }
        return;
    }
    for (int r = r0; r < r1; r += ROW_TILE) {
        int nr = r1 - r < ROW_TILE ? r1 - r : ROW_TILE;
        for (int i = 0; i < nr; i++)
            cq_dequant_row(w->type, base + (size_t)(r + i) * w->row_bytes, tile + (size_t)i * k, (size_t)k);
        cq_k_rows_times_tokens(tile, (size_t)k, nr, k, j->x, j->ldxt, j->n_tokens, y + (r - col0), ldy);
    }
}

/* The adapter term of rows [r0, r1), for every token: y[t*ldy + (r - col0)] += u_t . s B[r]. */
static void lowrank_rows(const matmul_job *j, const lora_term *lt, int r0, int r1, float *y, size_t ldy, int col0) {
    for (int t = 0; t < j->n_tokens; t++)
        cq_k_lowrank_rows(y + (size_t)t * ldy + (r0 - col0), r0, r1 - r0, lt->u + (size_t)t * lt->ldu, j->lora_rank,
                          lt->bt);
}

static void matmul_task(void *ctx, int task, int thread) {
    const matmul_job *j = ctx;
    int p = 0;
    while (p + 1 < j->n_parts && task >= j->part[p + 1].first_task) p++;
    const matmul_part *pt = &j->part[p];
    int r0 = (task - pt->first_task) * pt->rows_per_task, r1 = r0 + pt->rows_per_task;
    if (r1 > pt->w->rows) r1 = (int)pt->w->rows;
    float *tile = j->cm->tiles + (size_t)thread * j->cm->tile_floats;
    rows_times_tokens(j, pt->w, r0, r1, pt->y, pt->ldy, 0, tile);
    if (pt->lora.bt) lowrank_rows(j, &pt->lora, r0, r1, pt->y, pt->ldy, 0);
    if (!j->w2) return;
    float *up = tile + (size_t)ROW_TILE * j->cm->max_cols; /* GEGLU_ROWS x n_tokens, see cq_cpu_model_new */
    const size_t ldu = (size_t)(r1 - r0);
    rows_times_tokens(j, j->w2, r0, r1, up, ldu, r0, tile);
    if (j->lora2.bt) lowrank_rows(j, &j->lora2, r0, r1, up, ldu, r0);
    for (int t = 0; t < j->n_tokens; t++) {
        if (j->silu) cq_k_swiglu(pt->y + (size_t)t * pt->ldy + r0, up + (size_t)t * ldu, r1 - r0);
        else cq_k_geglu(pt->y + (size_t)t * pt->ldy + r0, up + (size_t)t * ldu, r1 - r0);
    }
}

static bool has_i16_dot(const cq_wmat *w) { return cq_qtype_has_i16_dot(w->type) && w->cols % 32 == 0; }

/* y_p (n_tokens, ldy_p) = x W_p^T for each of n_parts matrices of x's width, and with w2 (one part) the GeGLU of
 * two products; multithreaded over rows. lora (NULL: none): each part's adapter term, then w2's. quantized: the
 * tokens quantized to int16 once (when every weight format allows) and the products in integers, see cq_cpu_eval. */
static void matmul_parts(cq_cpu_model *cm, int n_parts, const cq_wmat *const *w, float *const *y, const size_t *ldy,
                         const lora_term *lora, const cq_wmat *w2, const float *x, size_t ldx, int n_tokens,
                         bool quantized) {
    matmul_job j = {.n_parts = n_parts, .w2 = w2, .silu = cm->m->ffn_silu, .x = x, .n_tokens = n_tokens, .cm = cm,
                    .lora_rank = cm->lora_rank};
    if (lora && w2) j.lora2 = lora[n_parts];
    bool int16 = quantized && (!w2 || has_i16_dot(w2));
    int n_tasks = 0;
    for (int p = 0; p < n_parts; p++) {
        int rows_per_task = GEGLU_ROWS;
        if (!w2) { /* about 8 tasks per thread to balance, each a whole number of tiles */
            int64_t per = w[p]->rows / ((int64_t)cm->n_threads * 8);
            if (per < ROW_TILE) per = ROW_TILE;
            rows_per_task = (int)((per + ROW_TILE - 1) / ROW_TILE * ROW_TILE);
        }
        j.part[p] = (matmul_part){w[p], y[p], ldy[p], rows_per_task, n_tasks, lora ? lora[p] : (lora_term){0}};
        n_tasks += (int)((w[p]->rows + rows_per_task - 1) / rows_per_task);
        int16 = int16 && has_i16_dot(w[p]);
    }
    cq_tokens_i16 xt16;
    if (int16 && n_tokens == 1) {
        cq_quantize_i16(x, (size_t)w[0]->cols, cm->xq);
        j.xq = cm->xq;
    } else if (int16) { /* in the room of the float packing (cq_cpu_model_new): pairs, then scales and sums */
        const size_t cols = (size_t)w[0]->cols, width = cq_k_packed_width(n_tokens);
        xt16.q = (int32_t *)cm->xpack;
        xt16.d = cm->xpack + cols / 2 * width;
        xt16.dsum = xt16.d + cols / 32 * width;
        cq_k_pack_tokens_i16(x, ldx, n_tokens, (int)cols, &xt16);
        j.xt16 = &xt16;
    } else if (n_tokens > 1) {
        cq_k_pack_tokens(x, ldx, n_tokens, (int)w[0]->cols, cm->xpack);
        j.x = cm->xpack;
        j.ldxt = cq_k_packed_width(n_tokens);
    }
    cq_pool_run(cm->pool, n_tasks, matmul_task, &j);
}

static void matmul(cq_cpu_model *cm, const cq_wmat *w, const cq_wmat *w2, const float *x, size_t ldx, int n_tokens,
                   float *y, size_t ldy, bool quantized) {
    matmul_parts(cm, 1, &w, &y, &ldy, NULL, w2, x, ldx, n_tokens, quantized);
}

/* The adapter's u = A x for group g of layer L (when it adapts any of the group's projections), and the terms of
 * the n projections p[] that take x (NULL entries: not adapted). */
static void lora_group(cq_cpu_model *cm, const lora_layer *L, int g, const float *x, size_t ldx, int n_tokens,
                       bool quantized, int n, const cq_proj *p, lora_term *terms) {
    memset(terms, 0, (size_t)n * sizeof *terms);
    if (!L || !L->a[g].data) return;
    matmul(cm, &L->a[g], NULL, x, ldx, n_tokens, cm->lora_u, (size_t)L->a[g].rows, quantized);
    for (int i = 0; i < n; i++)
        if (L->bt[p[i]]) terms[i] = (lora_term){L->bt[p[i]], cm->lora_u + L->u_off[p[i]], (size_t)L->a[g].rows};
}

/* ---- model and sequence -------------------------------------------------------------------------------------- */

#define HUGE_PAGE ((size_t)2 << 20)
#define MATRIX_ALIGN 64

/* The matrices of a model, each once (the output matrix is usually the embedding): n_layer * 7 + 2 at most. */
static int model_matrices(cq_gemma *m, cq_wmat **out) {
    int n = 0;
    out[n++] = &m->token_embd;
    if (m->output.data != m->token_embd.data) out[n++] = &m->output;
    for (int32_t l = 0; l < m->n_layer; l++) {
        cq_gemma_layer *L = &m->layers[l];
        cq_wmat *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wgate, &L->wup, &L->wdown};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) out[n++] = ws[i];
    }
    return n;
}

/* Decode reads every weight once per token, so its speed is the memory bandwidth one gets. Read through the
 * GGUF file mapping (4 KB pages of the page cache), the 178 MB output matrix of the 270M model streams ~20 %
 * slower than from anonymous memory on 2 MB pages (measured, 2 threads: 15 vs 12 ms). So the matrices are
 * copied once into such memory when they take at most a quarter of the RAM (the page cache's copy can then be
 * evicted); otherwise the mapping is used as it is. The bytes are the same: results do not change. */
/* The pages wholly inside [data, data + bytes), once copied, are given back when they belong to the GGUF's read-only
 * file mapping (m->file_map; never a caller's memory): otherwise the model counts twice in the process's memory
 * (docs/OPERATIONS.md). Reading them again, should anything do so, faults them in from the file. */
static void drop_source_pages(const cq_gemma *m, const void *data, size_t bytes, size_t page) {
    const uintptr_t map = (uintptr_t)m->file_map, d = (uintptr_t)data;
    if (!m->file_map || d < map || d + bytes > map + m->file_map_bytes) return;
#ifdef MADV_DONTNEED
    uintptr_t lo = (d + page - 1) & ~(uintptr_t)(page - 1), hi = (d + bytes) & ~(uintptr_t)(page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
#else
    (void)page;
#endif
}

static void copy_weights(cq_cpu_model *cm, const cq_gemma *m) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    cq_gemma own = *m;
    own.layers = malloc((size_t)m->n_layer * sizeof *own.layers);
    cq_wmat **mats = malloc(((size_t)m->n_layer * 7 + 2) * sizeof *mats);
    if (!own.layers || !mats) goto fail;
    memcpy(own.layers, m->layers, (size_t)m->n_layer * sizeof *own.layers);
    int n = model_matrices(&own, mats);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += ((size_t)mats[i]->rows * mats[i]->row_bytes + MATRIX_ALIGN - 1) / MATRIX_ALIGN * MATRIX_ALIGN;
    if (pages <= 0 || page <= 0 || total > (size_t)pages * (size_t)page / 4) goto fail;
    size_t map = total + HUGE_PAGE;
    uint8_t *base = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) goto fail;
    uint8_t *p = (uint8_t *)(((uintptr_t)base + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
#ifdef MADV_HUGEPAGE
    madvise(p, total, MADV_HUGEPAGE); /* advice: without transparent huge pages the copy still works */
#endif
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)mats[i]->rows * mats[i]->row_bytes;
        memcpy(p, mats[i]->data, bytes);
        drop_source_pages(m, mats[i]->data, bytes, (size_t)page);
        mats[i]->data = p;
        p += (bytes + MATRIX_ALIGN - 1) / MATRIX_ALIGN * MATRIX_ALIGN;
    }
    if (m->output.data == m->token_embd.data) own.output = own.token_embd;
    mprotect(base, map, PROT_READ);
    free(mats);
    cm->own = own;
    cm->m = &cm->own;
    cm->weights = base;
    cm->weights_map_bytes = map;
    return;
fail:
    free(own.layers);
    free(mats);
    cm->m = m;
}

void cq_op_round_bf16(float *out, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = cq_bf16_to_f32(cq_f32_to_bf16(x[i]));
}

void cq_op_bf16_planes(float *out, const float *x, size_t n, int planes) {
    for (size_t i = 0; i < n; i++) {
        float r = x[i];
        for (int p = 0; p < planes; p++) {
            const float h = cq_bf16_to_f32(cq_f32_to_bf16(r));
            out[(size_t)p * n + i] = h;
            r -= h; /* exact: h is r rounded to 8 significant bits */
        }
    }
}

void cq_cpu_model_set_kv_bf16(cq_cpu_model *cm, bool on) { cm->kv_bf16 = on; }

cq_status cq_cpu_model_new(const cq_gemma *m, int n_threads, bool exact, cq_cpu_model **out, cq_err *err) {
    *out = NULL;
    cq_cpu_model *cm = calloc(1, sizeof *cm);
    if (!cm) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_status s = cq_pool_new(n_threads, &cm->pool, err);
    if (s) {
        free(cm);
        return s;
    }
    copy_weights(cm, m);
    cm->n_threads = cq_pool_threads(cm->pool);
    size_t max_cols = (size_t)m->n_embd;
    if ((size_t)m->n_ff > max_cols) max_cols = (size_t)m->n_ff;
    if ((size_t)m->n_head * m->head_dim > max_cols) max_cols = (size_t)m->n_head * m->head_dim;
    cm->max_cols = max_cols;
    cm->tile_floats = (size_t)ROW_TILE * max_cols + (size_t)GEGLU_ROWS * CQ_CPU_BATCH;
    if (cm->tile_floats < (size_t)PROMPT_QUERY_ROWS * (m->head_dim + 1)) /* prompt_softmax_pv_task */
        cm->tile_floats = (size_t)PROMPT_QUERY_ROWS * (m->head_dim + 1);
    cm->tiles = malloc((size_t)cm->n_threads * cm->tile_floats * sizeof(float));
    cm->xpack = malloc(max_cols * cq_k_packed_width(CQ_CPU_BATCH) * sizeof(float));
    cm->xq = malloc((max_cols / 32 + 1) * sizeof *cm->xq);
    const char *env = getenv("CLAUSEQA_CPU_EXACT");
    cm->exact = exact || (env && *env && strcmp(env, "0"));
    const char *kv = getenv("CLAUSEQA_KV_BF16");
    cm->kv_bf16 = kv && *kv && strcmp(kv, "0");
    for (int kind = 0; kind < 2; kind++) cm->inv_freq[kind] = malloc((size_t)m->head_dim / 2 * sizeof(double));
    if (!cm->tiles || !cm->xpack || !cm->xq || !cm->inv_freq[0] || !cm->inv_freq[1]) {
        cq_cpu_model_free(cm);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory for CPU scratch");
    }
    rope_freqs(cm->inv_freq[0], m->head_dim, 1e4f, 1.0f); /* a model without local layers (qwen2) never reads it */
    for (int32_t l = 0; l < m->n_layer; l++) /* every layer of a kind shares its base and scaling */
        rope_freqs(cm->inv_freq[m->layers[l].global], m->head_dim, m->layers[l].rope_base, m->layers[l].rope_freq_scale);
    *out = cm;
    return CQ_OK;
}

static void lora_layers_free(lora_layer *ll, int32_t n_layer) {
    for (int32_t l = 0; ll && l < n_layer; l++) {
        for (int g = 0; g < N_GROUPS; g++) free((void *)ll[l].a[g].data);
        for (int p = 0; p < CQ_N_PROJ; p++) free(ll[l].bt[p]);
    }
    free(ll);
}

static int group_of(cq_proj p) {
    return p <= CQ_PROJ_V ? GROUP_QKV : p == CQ_PROJ_O ? GROUP_O : p == CQ_PROJ_DOWN ? GROUP_DOWN : GROUP_GATE_UP;
}

cq_status cq_cpu_model_set_lora(cq_cpu_model *cm, const cq_lora *lora, cq_err *err) {
    const cq_gemma *m = cm->m;
    lora_layer *ll = NULL;
    float *u = NULL;
    const int r = lora ? lora->info.rank : 0;
    if (lora) {
        ll = calloc((size_t)m->n_layer, sizeof *ll);
        u = malloc((size_t)CQ_CPU_BATCH * 3 * (size_t)r * sizeof *u);
        if (!ll || !u) goto nomem;
        for (int32_t l = 0; l < m->n_layer; l++) {
            const cq_lora_layer *src = &lora->layers[l];
            lora_layer *dst = &ll[l];
            int rows[N_GROUPS] = {0};
            for (int p = 0; p < CQ_N_PROJ; p++)
                if (src->a[p]) dst->u_off[p] = rows[group_of((cq_proj)p)], rows[group_of((cq_proj)p)] += r;
            for (int g = 0; g < N_GROUPS; g++) {
                if (!rows[g]) continue;
                const int64_t cols = g == GROUP_O ? (int64_t)m->n_head * m->head_dim : g == GROUP_DOWN ? m->n_ff : m->n_embd;
                uint16_t *a = malloc((size_t)rows[g] * (size_t)cols * sizeof *a);
                if (!a) goto nomem;
                dst->a[g] = (cq_wmat){a, CQ_QTYPE_BF16, rows[g], cols, (size_t)cols * sizeof *a};
            }
            for (int p = 0; p < CQ_N_PROJ; p++) {
                if (!src->a[p]) continue;
                const cq_wmat *w = cq_proj_weight(&m->layers[l], (cq_proj)p);
                uint16_t *a = (uint16_t *)dst->a[group_of((cq_proj)p)].data + (size_t)dst->u_off[p] * (size_t)w->cols;
                for (size_t i = 0; i < (size_t)r * (size_t)w->cols; i++) a[i] = cq_f32_to_bf16(src->a[p][i]);
                uint16_t *bt = malloc(cq_k_lowrank_tiled_size((int)w->rows, r) * sizeof *bt);
                if (!(dst->bt[p] = bt)) goto nomem;
                cq_k_lowrank_tile(src->b[p], (int)w->rows, r, lora->scale, bt);
            }
        }
    }
    lora_layers_free(cm->lora, m->n_layer);
    free(cm->lora_u);
    cm->lora = ll, cm->lora_u = u, cm->lora_rank = r;
    return CQ_OK;
nomem:
    lora_layers_free(ll, m->n_layer);
    free(u);
    return cq_err_set(err, CQ_ERR_NOMEM, "out of memory for the adapter");
}

void cq_cpu_model_free(cq_cpu_model *cm) {
    if (!cm) return;
    lora_layers_free(cm->lora, cm->m->n_layer);
    free(cm->lora_u);
    cq_pool_free(cm->pool);
    if (cm->weights) {
        munmap(cm->weights, cm->weights_map_bytes);
        free(cm->own.layers);
    }
    free(cm->tiles);
    free(cm->xpack);
    free(cm->xq);
    free(cm->inv_freq[0]);
    free(cm->inv_freq[1]);
    free(cm);
}

cq_status cq_cpu_seq_new(cq_cpu_model *cm, int32_t max_tokens, cq_cpu_seq **out, cq_err *err) {
    *out = NULL;
    const cq_gemma *m = cm->m;
    cq_cpu_seq *s = calloc(1, sizeof *s);
    if (!s) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    s->cm = cm;
    s->max_tokens = max_tokens;
    const size_t T = CQ_CPU_BATCH, d = (size_t)m->n_embd, qd = (size_t)m->n_head * m->head_dim,
                 kvd = (size_t)m->n_head_kv * m->head_dim, ff = (size_t)m->n_ff, f = sizeof(float);
    s->k = calloc((size_t)m->n_layer, sizeof *s->k);
    s->v = calloc((size_t)m->n_layer, sizeof *s->v);
    s->slots = calloc((size_t)m->n_layer, sizeof *s->slots);
    s->x = malloc(T * d * f), s->xn = malloc(T * d * f), s->o = malloc(T * d * f);
    s->q = malloc(T * qd * f), s->att = malloc(T * qd * f);
    s->kn = malloc(T * kvd * f), s->vn = malloc(T * kvd * f);
    s->ff = malloc(T * ff * f);
    s->rope = malloc(2 * T * (size_t)m->head_dim * f);
    s->scores = malloc((size_t)cm->n_threads * (size_t)m->n_head * (size_t)max_tokens * f);
    s->part = malloc((size_t)cm->n_threads * (size_t)m->n_head * ((size_t)m->head_dim + 2) * f);
    const size_t pq = T * (size_t)(m->n_head / m->n_head_kv);
    s->pa_scores = malloc(pq * PROMPT_KEYS * f), s->pa_v = malloc((size_t)PROMPT_KEYS * m->head_dim * f);
    s->pa_q = malloc(pq * (size_t)m->head_dim * f), s->pa_max = malloc(pq * f), s->pa_sum = malloc(pq * f);
    bool ok = s->k && s->v && s->slots && s->x && s->xn && s->o && s->q && s->att && s->kn && s->vn && s->ff &&
              s->rope && s->scores && s->part && s->pa_scores && s->pa_v && s->pa_q && s->pa_max && s->pa_sum;
    const int32_t ring = m->window + CQ_CPU_BATCH < max_tokens ? m->window + CQ_CPU_BATCH : max_tokens;
    for (int32_t l = 0; ok && l < m->n_layer; l++) {
        if (m->layers[l].global) continue; /* grown on demand */
        s->slots[l] = ring;
        s->k[l] = malloc((size_t)ring * kvd * f);
        s->v[l] = malloc((size_t)ring * kvd * f);
        ok = s->k[l] && s->v[l];
    }
    if (!ok) {
        cq_cpu_seq_free(s);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory for a decoder sequence of %d tokens", max_tokens);
    }
    *out = s;
    return CQ_OK;
}

void cq_cpu_seq_free(cq_cpu_seq *s) {
    if (!s) return;
    const cq_gemma *m = s->cm->m;
    for (int32_t l = 0; l < m->n_layer; l++) {
        if (s->k) free(s->k[l]);
        if (s->v) free(s->v[l]);
    }
    free(s->k), free(s->v), free(s->slots);
    free(s->x), free(s->xn), free(s->o), free(s->q), free(s->att), free(s->kn), free(s->vn), free(s->ff);
    free(s->rope), free(s->scores), free(s->part);
    free(s->pa_scores), free(s->pa_v), free(s->pa_q), free(s->pa_max), free(s->pa_sum);
    free(s);
}

size_t cq_cpu_seq_kv_bytes(const cq_cpu_seq *s) {
    const cq_gemma *m = s->cm->m;
    size_t total = 0, kvd = (size_t)m->n_head_kv * m->head_dim;
    for (int32_t l = 0; l < m->n_layer; l++) total += 2 * (size_t)s->slots[l] * kvd * sizeof(float);
    return total;
}

/* Global layers: room for positions [0, need), growing by doubling and keeping what is cached. */
static cq_status ensure_global_slots(cq_cpu_seq *s, int32_t need, cq_err *err) {
    const cq_gemma *m = s->cm->m;
    const size_t kvd = (size_t)m->n_head_kv * m->head_dim;
    for (int32_t l = 0; l < m->n_layer; l++) {
        if (!m->layers[l].global || s->slots[l] >= need) continue;
        int32_t cap = s->slots[l] ? s->slots[l] : 256;
        while (cap < need) cap = cap > s->max_tokens / 2 ? s->max_tokens : cap * 2;
        if (cap > s->max_tokens) cap = s->max_tokens;
        float *k = realloc(s->k[l], (size_t)cap * kvd * sizeof(float));
        if (!k) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory for the KV cache (%d positions)", cap);
        s->k[l] = k;
        float *v = realloc(s->v[l], (size_t)cap * kvd * sizeof(float));
        if (!v) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory for the KV cache (%d positions)", cap);
        s->v[l] = v;
        s->slots[l] = cap;
    }
    return CQ_OK;
}

typedef struct {
    const cq_gemma *m;
    const cq_gemma_layer *L;
    cq_cpu_seq *s;
    int32_t layer, pos0;
    int heads_per_task; /* consecutive heads of one KV head, see forward_chunk */
} attn_job;

/* One token and heads_per_task heads of one KV head: keys are positions [lo, p], lo = p - window + 1 on local
 * layers. In the ring buffer they are one run of slots, or two where it wraps. */
static void attn_task(void *ctx, int task, int thread) {
    const attn_job *j = ctx;
    const cq_gemma *m = j->m;
    const int tasks_per_token = m->n_head / j->heads_per_task, t = task / tasks_per_token,
              h = task % tasks_per_token * j->heads_per_task, kvh = h / (m->n_head / m->n_head_kv), hd = m->head_dim;
    const int32_t p = j->pos0 + t, lo = (!j->L->global && p - m->window + 1 > 0) ? p - m->window + 1 : 0;
    const size_t stride = (size_t)m->n_head_kv * hd;
    const int32_t slots = j->s->slots[j->layer], n = p - lo + 1, first = j->L->global ? lo : lo % slots;
    const int32_t n1 = first + n <= slots ? n : slots - first;
    attend_runs(j->s->q + ((size_t)t * m->n_head + h) * hd, j->heads_per_task, j->s->k[j->layer] + (size_t)kvh * hd,
                j->s->v[j->layer] + (size_t)kvh * hd, stride, hd, first, n1, n, m->attn_scale, m->attn_softcap,
                j->s->scores + (size_t)thread * m->n_head * j->s->max_tokens, j->s->att + ((size_t)t * m->n_head + h) * hd);
}

/* Keys from which a decode step's attention is split over the keys (decode_flash_task): below, the wait for the
 * merge costs more than reading a short cache once per head group. */
#define DECODE_SPLIT_KEYS 256

/* A decode step's attention in one dispatch (the default, quantized mode): task i takes a contiguous share of the
 * keys for every head, in chunks of FLASH_KEYS: the scores of the chunk (each K row read once for the heads of its
 * KV head), a running max and sum per head (online softmax: the head's accumulated values rescaled when the max
 * grows), the values weighted in (each V row read once). Its share (acc, max, sum per head) goes to part; the
 * caller merges the shares (flash_merge). Both threads stream their own keys, and a layer costs one wait. Exact
 * mode keeps attn_task (one softmax over all the keys, as attend_runs computes it: the reference). */
#define FLASH_KEYS 32

typedef struct {
    const cq_gemma *m;
    const float *q, *k, *v; /* k, v: the layer's cache */
    int32_t first, n1, n;   /* the keys: slots [first, first + n1), then [0, n - n1) */
    int32_t keys_per_task;
    float *scores;          /* per thread: (n_head, FLASH_KEYS) scratch */
    size_t scores_per_thread;
    float *part;            /* per task: (n_head, head_dim + 2): acc, then max and sum */
} decode_flash_job;

static void decode_flash_task(void *ctx, int task, int thread) {
    const decode_flash_job *j = ctx;
    const cq_gemma *m = j->m;
    const int hd = m->head_dim, H = m->n_head, group = H / m->n_head_kv;
    const size_t stride = (size_t)m->n_head_kv * hd, ld = (size_t)hd + 2;
    float *sc = j->scores + (size_t)thread * j->scores_per_thread, *part = j->part + (size_t)task * H * ld;
    for (int h = 0; h < H; h++) {
        memset(part + h * ld, 0, (size_t)hd * sizeof *part);
        part[h * ld + hd] = -INFINITY, part[h * ld + hd + 1] = 0;
    }
    const int32_t end = (task + 1) * j->keys_per_task < j->n ? (task + 1) * j->keys_per_task : j->n;
    for (int32_t i = task * j->keys_per_task; i < end;) {
        const int32_t slot = i < j->n1 ? j->first + i : i - j->n1;
        int32_t run = i < j->n1 ? j->n1 - i : j->n - i;
        if (run > end - i) run = end - i;
        if (run > FLASH_KEYS) run = FLASH_KEYS;
        for (int g = 0; g < m->n_head_kv; g++)
            cq_k_dot_heads(j->q + (size_t)g * group * hd, group, j->k + (size_t)slot * stride + (size_t)g * hd, stride,
                           run, hd, sc + (size_t)g * group * FLASH_KEYS, FLASH_KEYS);
        for (int h = 0; h < H; h++) {
            float *s = sc + (size_t)h * FLASH_KEYS, *acc = part + h * ld, mx = acc[hd];
            for (int32_t t = 0; t < run; t++) {
                float x = s[t] * m->attn_scale;
                if (m->attn_softcap > 0) x = m->attn_softcap * tanhf(x / m->attn_softcap);
                s[t] = x;
                if (x > mx) mx = x;
            }
            if (mx > acc[hd]) { /* the running max grows: rescale what was accumulated */
                const float c = expf(acc[hd] - mx);
                for (int e = 0; e < hd; e++) acc[e] *= c;
                acc[hd + 1] *= c;
                acc[hd] = mx;
            }
            float sum = 0;
            for (int32_t t = 0; t < run; t++) sum += (s[t] = expf(s[t] - mx));
            acc[hd + 1] += sum;
        }
        for (int g = 0; g < m->n_head_kv; g++)
            cq_k_axpy_heads(part + (size_t)g * group * ld, ld, group, sc + (size_t)g * group * FLASH_KEYS, FLASH_KEYS,
                            j->v + (size_t)slot * stride + (size_t)g * hd, stride, run, hd);
        i += run;
    }
}

/* out (n_head, hd) from the n_tasks shares of decode_flash_task */
static void flash_merge(const cq_gemma *m, const float *part, int n_tasks, float *out) {
    const int hd = m->head_dim;
    const size_t ld = (size_t)hd + 2;
    for (int h = 0; h < m->n_head; h++) {
        float mx = -INFINITY, sum = 0;
        for (int t = 0; t < n_tasks; t++) {
            const float *p = part + ((size_t)t * m->n_head + h) * ld;
            if (p[hd + 1] > 0 && p[hd] > mx) mx = p[hd];
        }
        float *o = out + (size_t)h * hd;
        memset(o, 0, (size_t)hd * sizeof *o);
        for (int t = 0; t < n_tasks; t++) {
            const float *p = part + ((size_t)t * m->n_head + h) * ld;
            if (!(p[hd + 1] > 0)) continue; /* a share without keys */
            const float c = expf(p[hd] - mx);
            sum += c * p[hd + 1];
            for (int e = 0; e < hd; e++) o[e] += c * p[e];
        }
        const float inv = 1.0f / sum;
        for (int e = 0; e < hd; e++) o[e] *= inv;
    }
}

bool cq_op_attention_shares(const float *q, int n_head, int n_head_kv, int hd, const float *k, const float *v,
                            int32_t first, int32_t n1, int32_t n, float scale, float softcap, int n_shares,
                            float *out) {
    cq_gemma g;
    memset(&g, 0, sizeof g);
    g.n_head = n_head, g.n_head_kv = n_head_kv, g.head_dim = hd, g.attn_scale = scale, g.attn_softcap = softcap;
    float *sc = malloc((size_t)n_head * FLASH_KEYS * sizeof *sc);
    float *part = malloc((size_t)n_shares * n_head * ((size_t)hd + 2) * sizeof *part);
    if (!sc || !part) {
        free(sc), free(part);
        return false;
    }
    decode_flash_job j = {&g, q, k, v, first, n1, n, (n + n_shares - 1) / n_shares, sc, 0, part};
    for (int t = 0; t < n_shares; t++) decode_flash_task(&j, t, 0);
    flash_merge(&g, part, n_shares, out);
    free(sc), free(part);
    return true;
}

/* ---- a prompt's attention as matrix products ---------------------------------------------------------------------
 * For T > 1 tokens, per KV head: its group * T queries (query i: token i / group, head g * group + i % group) against
 * the chunk's keys, positions [kmin, pos0 + T), in blocks of at most PROMPT_KEYS with an online softmax:
 *   scores S = Q K^T (cq_k_rows_times_tokens: the key rows against the packed queries; each key row read once for
 *   every query, where attend_runs read it once per token), then per query the mask (keys after it, or out of its
 *   window), scale and soft-cap, the running max and sum, and out = c out + P V (the probability rows against the V
 *   rows as packed "tokens" of head_dim elements). Two dispatches a block: keys split over tasks, then queries. */
typedef struct {
    const cq_gemma *m;
    cq_cpu_model *cm;
    cq_cpu_seq *s;
    int group, n_q;       /* heads per KV head; queries */
    int head0;            /* first head of the KV head */
    int32_t pos0, kmin, window; /* window 0: a global layer */
    const float *k, *v;   /* the layer's cache at the KV head's offset; rows of stride floats */
    size_t stride;
    int32_t slots, slot0; /* ring size (the cache's rows), slot of key position kmin */
    const float *qpack;   /* (head_dim, qw) the queries, k-major */
    size_t qw;
    int32_t j0, nb;       /* the block: keys [j0, j0 + nb) of the chunk's range */
    const float *vb;      /* its V rows, consecutive (ldv floats apart) */
    size_t ldv;
    bool last;            /* the last block: divide by the sums */
} prompt_att_job;

static float *prompt_att_out(const prompt_att_job *j, int i) { /* query i's output row in s->att */
    const int t = i / j->group, h = j->head0 + i % j->group;
    return j->s->att + ((size_t)t * j->m->n_head + h) * j->m->head_dim;
}

/* scores of keys [j0 + task * PROMPT_KEY_ROWS, ...) for every query, split where the ring wraps */
static void prompt_scores_task(void *ctx, int task, int thread) {
    (void)thread;
    const prompt_att_job *j = ctx;
    const int hd = j->m->head_dim;
    int32_t a = task * PROMPT_KEY_ROWS, b = a + PROMPT_KEY_ROWS < j->nb ? a + PROMPT_KEY_ROWS : j->nb;
    while (a < b) {
        const int32_t slot = (j->slot0 + j->j0 + a) % j->slots, run = b - a < j->slots - slot ? b - a : j->slots - slot;
        cq_k_rows_times_tokens(j->k + (size_t)slot * j->stride, j->stride, run, hd, j->qpack, j->qw, j->n_q,
                               j->s->pa_scores + a, PROMPT_KEYS);
        a += run;
    }
}

/* queries [task * PROMPT_QUERY_ROWS, ...): mask, softmax update, out = c out + P V */
static void prompt_softmax_pv_task(void *ctx, int task, int thread) {
    const prompt_att_job *j = ctx;
    const cq_gemma *m = j->m;
    const int hd = m->head_dim, i0 = task * PROMPT_QUERY_ROWS;
    const int i1 = i0 + PROMPT_QUERY_ROWS < j->n_q ? i0 + PROMPT_QUERY_ROWS : j->n_q, nq = i1 - i0;
    float *c = j->cm->tiles + (size_t)thread * j->cm->tile_floats, *pv = c + PROMPT_QUERY_ROWS;
    for (int i = i0; i < i1; i++) {
        float *sc = j->s->pa_scores + (size_t)i * PROMPT_KEYS;
        const int32_t p = j->pos0 + i / j->group, lo = j->window && p - j->window + 1 > 0 ? p - j->window + 1 : 0;
        float mx = j->s->pa_max[i];
        for (int32_t t = 0; t < j->nb; t++) {
            const int32_t kp = j->kmin + j->j0 + t;
            float x = sc[t] * m->attn_scale;
            if (m->attn_softcap > 0) x = m->attn_softcap * tanhf(x / m->attn_softcap);
            if (kp > p || kp < lo) x = -INFINITY;
            sc[t] = x;
            if (x > mx) mx = x;
        }
        if (mx == -INFINITY) { /* no key of this block for this query (nor any before) */
            memset(sc, 0, (size_t)j->nb * sizeof *sc);
            c[i - i0] = 1.0f;
            continue;
        }
        c[i - i0] = expf(j->s->pa_max[i] - mx); /* 0 on the first block with keys */
        j->s->pa_sum[i] = j->s->pa_sum[i] * c[i - i0] + (float)cq_k_exp_shift(sc, j->nb, mx);
        j->s->pa_max[i] = mx;
    }
    /* pv (hd, nq): element e of query i at pv[e * nq + i - i0] */
    cq_k_rows_times_tokens(j->s->pa_scores + (size_t)i0 * PROMPT_KEYS, PROMPT_KEYS, nq, j->nb, j->vb, j->ldv, hd, pv,
                           (size_t)nq);
    for (int i = i0; i < i1; i++) {
        float *out = prompt_att_out(j, i);
        const float ci = c[i - i0], inv = j->last ? 1.0f / j->s->pa_sum[i] : 1.0f;
        for (int e = 0; e < hd; e++) out[e] = (out[e] * ci + pv[(size_t)e * nq + i - i0]) * inv;
    }
}

static void prompt_attention(cq_cpu_seq *s, int32_t l, int T, int32_t pos0) {
    cq_cpu_model *cm = s->cm;
    const cq_gemma *m = cm->m;
    const cq_gemma_layer *L = &m->layers[l];
    const int hd = m->head_dim, group = m->n_head / m->n_head_kv, n_q = T * group;
    const int32_t window = L->global ? 0 : m->window;
    const int32_t kmin = window && pos0 - window + 1 > 0 ? pos0 - window + 1 : 0, nk = pos0 + T - kmin;
    const size_t stride = (size_t)m->n_head_kv * hd, qw = cq_k_packed_width(n_q);
    for (int g = 0; g < m->n_head_kv; g++) {
        /* the queries of KV head g, k-major, in the room of the matrix products' packing */
        const float *q = s->q + (size_t)g * group * hd;
        size_t ldq = (size_t)hd;
        if (m->n_head_kv > 1) {
            for (int t = 0; t < T; t++)
                memcpy(s->pa_q + (size_t)t * group * hd, s->q + ((size_t)t * m->n_head + (size_t)g * group) * hd,
                       (size_t)group * hd * sizeof *s->pa_q);
            q = s->pa_q;
        }
        cq_k_pack_tokens(q, ldq, n_q, hd, cm->xpack);
        for (int i = 0; i < n_q; i++) s->pa_max[i] = -INFINITY, s->pa_sum[i] = 0;
        for (int i = 0; i < n_q; i++) {
            const int t = i / group, h = g * group + i % group;
            memset(s->att + ((size_t)t * m->n_head + h) * hd, 0, (size_t)hd * sizeof *s->att);
        }
        const int n_blocks = (nk + PROMPT_KEYS - 1) / PROMPT_KEYS;
        for (int blk = 0; blk < n_blocks; blk++) {
            const int32_t j0 = (int32_t)((int64_t)nk * blk / n_blocks), j1 = (int32_t)((int64_t)nk * (blk + 1) / n_blocks);
            prompt_att_job j = {m, cm, s, group, n_q, g * group, pos0, kmin, window, s->k[l] + (size_t)g * hd,
                                s->v[l] + (size_t)g * hd, stride, s->slots[l], L->global ? kmin : kmin % s->slots[l],
                                cm->xpack, qw, j0, j1 - j0, NULL, stride, blk == n_blocks - 1};
            const int32_t slot = (j.slot0 + j0) % j.slots;
            if (slot + j.nb <= j.slots) {
                j.vb = j.v + (size_t)slot * stride;
            } else { /* the ring wraps inside the block: its V rows copied together */
                for (int32_t t = 0; t < j.nb; t++)
                    memcpy(s->pa_v + (size_t)t * hd, j.v + (size_t)((slot + t) % j.slots) * stride, (size_t)hd * sizeof *s->pa_v);
                j.vb = s->pa_v, j.ldv = (size_t)hd;
            }
            cq_pool_run(cm->pool, (j.nb + PROMPT_KEY_ROWS - 1) / PROMPT_KEY_ROWS, prompt_scores_task, &j);
            cq_pool_run(cm->pool, (n_q + PROMPT_QUERY_ROWS - 1) / PROMPT_QUERY_ROWS, prompt_softmax_pv_task, &j);
        }
    }
}

/* One chunk of T <= CQ_CPU_BATCH tokens at positions pos0.. (formulas in decoder/decoder.h). */
static void forward_chunk(cq_cpu_seq *s, const int32_t *tokens, int T, int32_t pos0, float *logits, bool all_logits,
                          bool quantized) {
    cq_cpu_model *cm = s->cm;
    const cq_gemma *m = cm->m;
    const int d = m->n_embd, hd = m->head_dim, half = hd / 2, qd = m->n_head * hd, kvd = m->n_head_kv * hd;
    for (int t = 0; t < T; t++) {
        float *xt = s->x + (size_t)t * d;
        cq_dequant_row(m->token_embd.type, (const uint8_t *)m->token_embd.data + (size_t)tokens[t] * m->token_embd.row_bytes,
                       xt, (size_t)d);
        if (m->embed_scale != 1.0f)
            for (int i = 0; i < d; i++) xt[i] *= m->embed_scale;
        for (int kind = 0; kind < 2; kind++) rope_angles(s->rope + ((size_t)kind * T + t) * hd, half, pos0 + t, cm->inv_freq[kind]);
    }
    /* In the quantized (default) mode, a chunk of one token (a decode step, or the last chunk of a prompt of 64 k + 1
     * tokens) quantizes the input of every product. A prompt's chunk (T > 1) quantizes the inputs of the o and
     * gate/up products only (59 % of a layer's weights), and only where integer products are the faster ones
     * (cq_k_tokens_i16_fast). Measured on the real model, largest logit difference from the exact mode
     * (tests/unit/test_decoder_forward.c, tolerance 1e-2): o and gate/up 3.6e-3, as with decode steps alone; with
     * the down product too 7e-3 to 1.1e-2; with every product 1.6e-2, and simulated with activation blocks of 32, 16
     * and 8 elements 2.4e-2, 5.7e-3 and 9.1e-3 (no trend with the block size: not a few outliers, but small errors
     * grown over 18 layers and hundreds of positions). */
    const bool all_int16 = quantized && T == 1, some_int16 = all_int16 || (quantized && cq_k_tokens_i16_fast());
    for (int32_t l = 0; l < m->n_layer; l++) {
        const cq_gemma_layer *L = &m->layers[l];
        const float *rope = s->rope + (size_t)L->global * T * hd;
        for (int t = 0; t < T; t++) cq_op_rmsnorm(s->xn + (size_t)t * d, s->x + (size_t)t * d, L->attn_norm, d, m->rms_eps);
        const lora_layer *LA = cm->lora ? &cm->lora[l] : NULL;
        lora_term lt[3];
        const cq_wmat *qkv[3] = {&L->wq, &L->wk, &L->wv};
        float *const qkv_out[3] = {s->q, s->kn, s->vn};
        const size_t qkv_ld[3] = {(size_t)qd, (size_t)kvd, (size_t)kvd};
        lora_group(cm, LA, GROUP_QKV, s->xn, d, T, all_int16, 3, (const cq_proj[]){CQ_PROJ_Q, CQ_PROJ_K, CQ_PROJ_V}, lt);
        matmul_parts(cm, 3, qkv, qkv_out, qkv_ld, LA ? lt : NULL, NULL, s->xn, d, T, all_int16);
        if (L->bq) /* qwen2's projection biases */
            for (int t = 0; t < T; t++) {
                add_into(s->q + (size_t)t * qd, L->bq, (size_t)qd);
                add_into(s->kn + (size_t)t * kvd, L->bk, (size_t)kvd);
                add_into(s->vn + (size_t)t * kvd, L->bv, (size_t)kvd);
            }
        for (int t = 0; t < T; t++) {
            const float *cs = rope + (size_t)t * hd;
            for (int h = 0; h < m->n_head; h++) {
                float *qh = s->q + (size_t)t * qd + (size_t)h * hd;
                if (L->q_norm) cq_op_rmsnorm(qh, qh, L->q_norm, hd, m->rms_eps);
                rope_apply(qh, half, cs);
            }
            for (int h = 0; h < m->n_head_kv; h++) {
                float *kh = s->kn + (size_t)t * kvd + (size_t)h * hd;
                if (L->k_norm) cq_op_rmsnorm(kh, kh, L->k_norm, hd, m->rms_eps);
                rope_apply(kh, half, cs);
            }
            int32_t p = pos0 + t, slot = L->global ? p : p % s->slots[l];
            if (cm->kv_bf16) { /* the values a bf16 cache would hold (also read back for this chunk's own keys) */
                cq_op_round_bf16(s->k[l] + (size_t)slot * kvd, s->kn + (size_t)t * kvd, (size_t)kvd);
                cq_op_round_bf16(s->v[l] + (size_t)slot * kvd, s->vn + (size_t)t * kvd, (size_t)kvd);
            } else {
                memcpy(s->k[l] + (size_t)slot * kvd, s->kn + (size_t)t * kvd, (size_t)kvd * sizeof(float));
                memcpy(s->v[l] + (size_t)slot * kvd, s->vn + (size_t)t * kvd, (size_t)kvd * sizeof(float));
            }
        }
        const int32_t lo = (!L->global && pos0 - m->window + 1 > 0) ? pos0 - m->window + 1 : 0, n = pos0 - lo + 1;
        if (T == 1 && quantized && cm->n_threads > 1 && hd % 8 == 0 && n >= DECODE_SPLIT_KEYS) {
            const int32_t first = L->global ? lo : lo % s->slots[l];
            const int32_t n1 = first + n <= s->slots[l] ? n : s->slots[l] - first;
            const int tasks = cm->n_threads;
            decode_flash_job fj = {m, s->q, s->k[l], s->v[l], first, n1, n, (n + tasks - 1) / tasks, s->scores,
                                   (size_t)m->n_head * s->max_tokens, s->part};
            cq_pool_run(cm->pool, tasks, decode_flash_task, &fj);
            flash_merge(m, s->part, tasks, s->att);
        } else if (T > 1 && hd % 16 == 0) {
            prompt_attention(s, l, T, pos0);
        } else { /* every head of a KV head in one task (its K and V rows read once), unless that leaves a thread
                  * idle (a decode step over few keys: 2 tasks of 2 heads for 2 threads) */
            int heads_per_task = m->n_head / m->n_head_kv;
            while (heads_per_task % 2 == 0 && T * (m->n_head / heads_per_task) < cm->n_threads) heads_per_task /= 2;
            attn_job aj = {m, L, s, l, pos0, heads_per_task};
            cq_pool_run(cm->pool, T * (m->n_head / heads_per_task), attn_task, &aj);
        }
        const cq_wmat *wo = &L->wo;
        const size_t ld_o = (size_t)d;
        lora_group(cm, LA, GROUP_O, s->att, qd, T, some_int16, 1, (const cq_proj[]){CQ_PROJ_O}, lt);
        matmul_parts(cm, 1, &wo, &s->o, &ld_o, LA ? lt : NULL, NULL, s->att, qd, T, some_int16);
        for (int t = 0; t < T; t++) {
            float *ot = s->o + (size_t)t * d;
            if (L->post_attn_norm) cq_op_rmsnorm(ot, ot, L->post_attn_norm, d, m->rms_eps);
            add_into(s->x + (size_t)t * d, ot, d);
            cq_op_rmsnorm(s->xn + (size_t)t * d, s->x + (size_t)t * d, L->ffn_norm, d, m->rms_eps);
        }
        const cq_wmat *wg = &L->wgate, *wd = &L->wdown;
        const size_t ld_ff = (size_t)m->n_ff;
        lora_group(cm, LA, GROUP_GATE_UP, s->xn, d, T, some_int16, 2, (const cq_proj[]){CQ_PROJ_GATE, CQ_PROJ_UP}, lt);
        matmul_parts(cm, 1, &wg, &s->ff, &ld_ff, LA ? lt : NULL, &L->wup, s->xn, d, T, some_int16);
        lora_group(cm, LA, GROUP_DOWN, s->ff, m->n_ff, T, all_int16, 1, (const cq_proj[]){CQ_PROJ_DOWN}, lt);
        matmul_parts(cm, 1, &wd, &s->o, &ld_o, LA ? lt : NULL, NULL, s->ff, m->n_ff, T, all_int16);
        for (int t = 0; t < T; t++) {
            float *ot = s->o + (size_t)t * d;
            if (L->post_ffw_norm) cq_op_rmsnorm(ot, ot, L->post_ffw_norm, d, m->rms_eps);
            add_into(s->x + (size_t)t * d, ot, d);
        }
    }
    if (!logits) return;
    int first = all_logits ? 0 : T - 1, n_out = T - first;
    for (int t = first; t < T; t++)
        cq_op_rmsnorm(s->xn + (size_t)(t - first) * d, s->x + (size_t)t * d, m->output_norm, d, m->rms_eps);
    matmul(cm, &m->output, NULL, s->xn, d, n_out, logits, (size_t)m->n_vocab, some_int16);
    if (m->final_softcap > 0) {
        const float c = m->final_softcap;
        for (size_t i = 0; i < (size_t)n_out * m->n_vocab; i++) logits[i] = c * tanhf(logits[i] / c);
    }
}

cq_status cq_cpu_eval(cq_cpu_seq *s, const int32_t *tokens, size_t n, int32_t pos, float *logits, bool all_logits,
                      cq_err *err) {
    cq_status st = ensure_global_slots(s, pos + (int32_t)n, err);
    if (st) return st;
    const size_t V = (size_t)s->cm->m->n_vocab;
    const bool quantized = !all_logits && !s->cm->exact;
    for (size_t i = 0; i < n; i += CQ_CPU_BATCH) {
        int T = n - i < CQ_CPU_BATCH ? (int)(n - i) : CQ_CPU_BATCH;
        float *out = NULL;
        if (logits && all_logits) out = logits + i * V;
        else if (logits && i + (size_t)T == n) out = logits;
        forward_chunk(s, tokens + i, T, pos + (int32_t)i, out, all_logits, quantized);
    }
    return CQ_OK;
}
