/* Why the CPU runs an adapter as a side product rather than merged into its quantized weights: the logits of a
 * random adapter three ways, against the exact float merge (every adapted weight W + s B A in float, run by the exact
 * CPU forward as F32 matrices):
 *   side product   the runtime (quantized W, plus s B (A x) from bf16 factors)
 *   requantized    W + s B A put back on the file's quantization grid, each block keeping its scales (what merging
 *                  at load into the stored format does: Q5_0 and Q8_0 steps d, Q4_K d*sc with its min, Q6_K d*sc),
 *                  run as F32 matrices holding exactly the grid values
 *   base           no adapter (how far the adapter moves the logits at all)
 * and how much of the adapter's effect each keeps: 1 - |L - L_merge| / |L_base - L_merge| (RMS over all logits).
 *   bench_adapter_merge [--model PATH] [--rank 32] [--gain 0.5] [--tokens 48] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/test_adapter_util.h"
#include "decoder/decoder.h"
#include "decoder/forward_cpu.h"
#include "decoder/gguf.h"
#include "decoder/lora.h"
#include "decoder/model.h"
#include "decoder/quant.h"

static void die(const char *what, const cq_err *err) {
    fprintf(stderr, "bench_adapter_merge: %s: %s\n", what, err->msg);
    exit(1);
}

static float half_at(const uint8_t *p) { return cq_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* Puts v on the grid of element e of a row of the type, with that row's block scales (row: the stored bytes): the
 * nearest representable value, clamped to the quant range. */
static float requant(uint32_t type, const uint8_t *row, size_t e, float v) {
    float step, off;
    int qmin, qmax;
    switch (type) {
    case CQ_QTYPE_Q8_0: {
        const uint8_t *b = row + (e / 32) * 34;
        step = half_at(b), off = 0, qmin = -128, qmax = 127;
        break;
    }
    case CQ_QTYPE_Q5_0: {
        const uint8_t *b = row + (e / 32) * 22;
        step = half_at(b), off = -16 * step, qmin = 0, qmax = 31;
        break;
    }
    case CQ_QTYPE_Q4_K: { /* 144 B / 256: d, dmin, scales[12], qs; sub-block j = elements [32j, 32j + 32) */
        const uint8_t *b = row + (e / 256) * 144, *s = b + 4;
        const int j = (int)(e % 256) / 32;
        int sc, m;
        if (j < 4) sc = s[j] & 63, m = s[j + 4] & 63;
        else sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4), m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        step = half_at(b) * (float)sc, off = -half_at(b + 2) * (float)m, qmin = 0, qmax = 15;
        break;
    }
    case CQ_QTYPE_Q6_K: { /* 210 B / 256: ql, qh, int8 scales[16] (one per 16 elements), d */
        const uint8_t *b = row + (e / 256) * 210;
        step = half_at(b + 208) * (float)(int8_t)b[192 + (e % 256) / 16], off = 0, qmin = -32, qmax = 31;
        break;
    }
    default: return v; /* float formats hold it as it is */
    }
    if (step == 0) return off;
    float q = roundf((v - off) / step);
    q = q < qmin ? qmin : q > qmax ? qmax : q;
    return q * step + off;
}

/* All logits of ids through model m (exact CPU forward). */
static float *logits_of(const cq_gemma *m, const int32_t *ids, int n) {
    cq_err err = {0};
    cq_cpu_model *cm;
    cq_cpu_seq *s;
    if (cq_cpu_model_new(m, 0, true, &cm, &err) || cq_cpu_seq_new(cm, n + 1, &s, &err)) die("cpu model", &err);
    float *out = malloc((size_t)n * m->n_vocab * sizeof *out);
    if (cq_cpu_eval(s, ids, (size_t)n, 0, out, true, &err)) die("eval", &err);
    cq_cpu_seq_free(s);
    cq_cpu_model_free(cm);
    return out;
}

static float *decoder_logits(cq_decoder *d, const int32_t *ids, int n) {
    cq_err err = {0};
    const int V = cq_decoder_get_info(d)->n_vocab;
    float *out = malloc((size_t)n * V * sizeof *out);
    cq_decoder_seq *s;
    if (cq_decoder_seq_new(d, n + 1, &s, &err) || cq_decoder_eval(s, ids, (size_t)n, out, true, &err)) die("eval", &err);
    cq_decoder_seq_free(s);
    return out;
}

typedef struct {
    double rms, max, kept;
    int argmax_agree;
} cmp;

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static cmp compare(const float *x, const float *ref, const float *base, int n, int V) {
    double e = 0, mv = 0, moved = 0;
    int agree = 0;
    for (size_t i = 0; i < (size_t)n * V; i++) {
        double d = (double)x[i] - ref[i], b = (double)base[i] - ref[i];
        e += d * d, moved += b * b;
        if (fabs(d) > mv) mv = fabs(d);
    }
    for (int t = 0; t < n; t++) agree += argmax(x + (size_t)t * V, V) == argmax(ref + (size_t)t * V, V);
    return (cmp){sqrt(e / ((double)n * V)), mv, 1.0 - sqrt(e / moved), agree};
}

int main(int argc, char **argv) {
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    static char model[4096];
    snprintf(model, sizeof model, "%s/data/models/gemma-3-270m-q4_k_m.gguf", src ? src : ".");
    int rank = 32, n = 48;
    float gain = 0.5f;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) snprintf(model, sizeof model, "%s", argv[i + 1]);
        else if (!strcmp(argv[i], "--rank")) rank = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--gain")) gain = (float)atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--tokens")) n = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    cq_err err = {0};
    cq_decoder *exact;
    cq_decoder_options oe = {CQ_DEVICE_CPU, 0, true};
    if (cq_decoder_open(model, &oe, &exact, &err)) die("open", &err);
    const cq_decoder_info *info = cq_decoder_get_info(exact);
    const int V = info->n_vocab;
    char sha[65], dir[128];
    if (cq_model_file_sha256(model, sha, &err)) die("digest", &err);
    snprintf(dir, sizeof dir, "/tmp/cq_bench_merge_%d", (int)getpid());
    test_adapter ta;
    test_adapter_spec spec = {.rank = rank, .alpha = 2.0f * rank, .b_gain = gain, .base_sha256 = sha, .seed = 11};
    if (test_write_adapter(dir, info, &spec, &ta)) return 1;
    /* a prompt of real text */
    const char *text = "第四十四条 有下列情形之一的，用人单位应当按照下列标准支付高于劳动者正常工作时间工资的工资报酬：安排劳动者"
                       "延长工作时间的，支付不低于工资的百分之一百五十的工资报酬。 The Customer shall pay each invoice within "
                       "thirty days of its date by bank transfer.";
    int32_t *ids;
    size_t n_ids;
    if (cq_tokenizer_encode(cq_decoder_tokenizer(exact), text, strlen(text), CQ_TOK_ADD_BOS, &ids, &n_ids, &err))
        die("encode", &err);
    if ((size_t)n > n_ids) n = (int)n_ids;

    float *base = decoder_logits(exact, ids, n);
    if (cq_decoder_load_adapter(exact, dir, &err)) die("adapter", &err);
    float *side = decoder_logits(exact, ids, n);

    cq_gguf *g;
    cq_gemma merged, requantized;
    if (cq_gguf_open(model, &g, &err) || cq_gemma_load(g, &merged, &err) || cq_gemma_load(g, &requantized, &err))
        die("model", &err);
    double dw2 = 0, w2 = 0, changed = 0, total = 0;
    float **owned = calloc((size_t)merged.n_layer * CQ_N_PROJ * 2, sizeof *owned);
    size_t n_owned = 0;
    for (int32_t l = 0; l < merged.n_layer; l++)
        for (int p = 0; p < CQ_N_PROJ; p++) {
            const float *a = ta.a[l * TEST_N_PROJ + p], *b = ta.b[l * TEST_N_PROJ + p];
            cq_wmat *wm = (cq_wmat *)cq_proj_weight(&merged.layers[l], (cq_proj)p);
            cq_wmat *wr = (cq_wmat *)cq_proj_weight(&requantized.layers[l], (cq_proj)p);
            const size_t cols = (size_t)wm->cols, cnt = (size_t)wm->rows * cols;
            float *fm = malloc(cnt * sizeof *fm), *fr = malloc(cnt * sizeof *fr), *w0 = malloc(cols * sizeof *w0);
            owned[n_owned++] = fm, owned[n_owned++] = fr;
            cq_op_lora_merge_ref(wm, a, b, ta.rank, ta.scale, fm);
            for (int64_t r = 0; r < wm->rows; r++) {
                const uint8_t *row = (const uint8_t *)wm->data + (size_t)r * wm->row_bytes;
                cq_dequant_row(wm->type, row, w0, cols);
                for (size_t c = 0; c < cols; c++) {
                    const float v = fm[(size_t)r * cols + c];
                    fr[(size_t)r * cols + c] = requant(wm->type, row, c, v);
                    dw2 += (double)(v - w0[c]) * (v - w0[c]), w2 += (double)w0[c] * w0[c];
                    changed += fr[(size_t)r * cols + c] != w0[c], total++;
                }
            }
            *wm = (cq_wmat){fm, CQ_QTYPE_F32, wm->rows, wm->cols, cols * sizeof(float)};
            *wr = (cq_wmat){fr, CQ_QTYPE_F32, wr->rows, wr->cols, cols * sizeof(float)};
            free(w0);
        }
    float *ref = logits_of(&merged, ids, n), *req = logits_of(&requantized, ids, n);
    printf("adapter rank %d (random, alpha = 2 rank, B gain %.2f): |s B A| / |W| = %.3f over all adapted weights; "
           "requantizing changes %.1f %% of their quants\n", rank, (double)gain, sqrt(dw2 / w2), 100 * changed / total);
    printf("%d positions x %d logits against the float merge:\n", n, V);
    printf("%-34s %10s %10s %14s %14s\n", "", "RMS", "max", "effect kept", "argmax agrees");
    const char *names[3] = {"side product (the runtime)", "merged and requantized", "base (no adapter)"};
    float *rows[3] = {side, req, base};
    for (int i = 0; i < 3; i++) {
        cmp c = compare(rows[i], ref, base, n, V);
        printf("%-34s %10.2e %10.2e %13.1f%% %8d/%d\n", names[i], c.rms, c.max, 100 * c.kept, c.argmax_agree, n);
    }
    for (size_t i = 0; i < n_owned; i++) free(owned[i]);
    free(owned);
    cq_gemma_free(&merged), cq_gemma_free(&requantized);
    cq_gguf_close(g);
    test_adapter_free(&ta);
    test_rm_adapter(dir);
    free(base), free(side), free(ref), free(req), free(ids);
    cq_decoder_close(exact);
    return 0;
}
