/* Decoder throughput: prefill (prompt tokens/s, logits of the last token only) and decode (one token at a time,
 * full logits each step), plus all-position scoring (perplexity mode). Not a test: prints a table.
 *   bench_decoder [--model PATH] [--device cpu|cuda] [--threads N] [--prompt N] [--decode N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention/decoder.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int main(int argc, char **argv) {
    const char *model = "data/models/gemma-3-270m-q4_k_m.gguf";
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    static char path[4096];
    if (src) {
        snprintf(path, sizeof path, "%s/%s", src, model);
        model = path;
    }
    cq_decoder_options opt = {CQ_DEVICE_CPU, 0};
    int n_prompt = 512, n_decode = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--threads")) opt.n_threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prompt")) n_prompt = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--decode")) n_decode = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--device")) opt.device = !strcmp(argv[i + 1], "cuda") ? CQ_DEVICE_CUDA : CQ_DEVICE_CPU;
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    cq_err err = {0};
    cq_decoder *d;
    double t0 = now_s();
    if (cq_decoder_open(model, &opt, &d, &err)) {
        fprintf(stderr, "bench_decoder: %s\n", err.msg);
        return 1;
    }
    double t_open = now_s() - t0;
    const cq_decoder_info *info = cq_decoder_get_info(d);
    /* A prompt of real text: repeat a legal sentence until n_prompt tokens. */
    const char *sentence = "第一条 为了保护劳动者的合法权益，调整劳动关系，根据宪法，制定本法。 Article 1. This Agreement "
                           "governs the termination of employment and the payment of overtime. ";
    int32_t *ids = malloc((size_t)(n_prompt + n_decode) * sizeof *ids), *piece;
    size_t n_piece, have = 0;
    cq_tokenizer_encode(cq_decoder_tokenizer(d), sentence, strlen(sentence), 0, &piece, &n_piece, &err);
    ids[have++] = cq_tokenizer_bos(cq_decoder_tokenizer(d));
    for (; have < (size_t)n_prompt; have++) ids[have] = piece[(have - 1) % n_piece];
    free(piece);
    float *logits = malloc((size_t)info->n_vocab * sizeof *logits);
    cq_decoder_seq *s;
    if (cq_decoder_seq_new(d, n_prompt + n_decode + 72, &s, &err)) {
        fprintf(stderr, "bench_decoder: %s\n", err.msg);
        return 1;
    }
    /* warm-up: page in the weights, let the GPU path capture its graphs */
    cq_decoder_eval(s, ids, (size_t)n_prompt, logits, false, &err);
    cq_decoder_eval(s, ids, 1, logits, false, &err);
    cq_decoder_seq_reset(s);

    t0 = now_s();
    if (cq_decoder_eval(s, ids, (size_t)n_prompt, logits, false, &err)) {
        fprintf(stderr, "bench_decoder: %s\n", err.msg);
        return 1;
    }
    double t_prefill = now_s() - t0;
    t0 = now_s();
    for (int i = 0; i < n_decode; i++) {
        int32_t next = argmax(logits, info->n_vocab);
        if (cq_decoder_eval(s, &next, 1, logits, false, &err)) {
            fprintf(stderr, "bench_decoder: %s\n", err.msg);
            return 1;
        }
    }
    double t_decode = now_s() - t0;
    /* scoring: 64 tokens with logits at every position (the perplexity path) */
    int n_score = 64;
    float *all = malloc((size_t)n_score * info->n_vocab * sizeof *all);
    cq_decoder_seq_reset(s);
    t0 = now_s();
    cq_decoder_eval(s, ids, (size_t)n_score, all, true, &err);
    double t_score = now_s() - t0;

    printf("decoder benchmark: %s (%d layers, d=%d, vocab %d), device %s, %d threads\n", info->name, info->n_layer,
           info->n_embd, info->n_vocab, info->device == CQ_DEVICE_CUDA ? "cuda" : "cpu", opt.n_threads);
    printf("%-34s %10s %12s\n", "phase", "tokens", "tokens/s");
    printf("%-34s %10s %12.2f s\n", "open (map, tokenizer)", "-", t_open);
    printf("%-34s %10d %12.1f   (%.1f ms: time to first token)\n", "prefill (last logits)", n_prompt,
           n_prompt / t_prefill, t_prefill * 1e3);
    printf("%-34s %10d %12.1f\n", "decode (greedy, batch 1)", n_decode, n_decode / t_decode);
    printf("%-34s %10d %12.1f\n", "score (logits at every position)", n_score, n_score / t_score);
    free(all);
    free(logits);
    free(ids);
    cq_decoder_seq_free(s);
    cq_decoder_close(d);
    return 0;
}
