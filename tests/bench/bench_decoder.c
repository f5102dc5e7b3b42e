/* Decoder throughput: prefill (prompt tokens/s, logits of the last token only; median of several runs, its time is
 * the time to first token), decode at batch 1 (full logits to the host every step, argmax on the host; and on
 * CUDA greedy steps with the argmax on the GPU), and all-position scoring (perplexity mode). Not a test: prints a
 * table. On CUDA the prefill runs (the same sequence reset and fed again) replay captured graphs; a fresh
 * sequence's prefill, which runs its kernels directly as an ask's does, is timed too. On CUDA it also measures the
 * device-to-device copy bandwidth and the bandwidth a greedy step achieves (its weight bytes per token over its
 * time), and prints the GPU KV-cache size at a 32k context.
 * With --compare-cpu it runs the same short prompt through the CPU decoder and the GPU one and prints both greedy
 * continuations, the steps whose argmax agree (the CPU's token fed to both) and the logits' relative error.
 * With --isa LIST (CPU; e.g. avx2,avx512) the CPU kernels' instruction set (decoder/cpu_isa.h) alternates within
 * each of --runs rounds: a prefill of the prompt, then --decode steps after it, per level; medians and ranges per
 * level (an A/B on one model copy, in one process, on a shared machine).
 * --adapter DIR runs everything with that LoRA adapter loaded. --ranks 0,16,32,64 instead compares adapters of
 * those ranks (random factors on every projection; 0: none), one decoder each, their decode steps interleaved token
 * by token over --rounds prompts (the box's load then hits them alike): prefill and decode rates per rank, and each
 * rank's step time relative to the first's.
 * --score N times scoring N prompts of --prompt tokens (a reranker's candidates: cq_decoder_score_prompts, packed
 * into batched prefill chunks on CUDA) against running them one at a time, --runs times each, alternating.
 * --perplexity N: the tokens of the scoring pass with logits at every position (default 64; 0 skips it).
 * --concurrent LIST (e.g. 1,8,32,64): for each N, N threads with a sequence each (the --prompt tokens prefilled
 * first) step --decode tokens at once through cq_decoder_eval_top (64 candidates a step, the best fed back, as an
 * ask's answer loop does; on CUDA the decoder batches the steps that meet): aggregate decode tokens/s over the
 * wall time, per-sequence tokens/s, and the mean batch the decoder ran (its stats), --runs times each, the median.
 *   bench_decoder [--model PATH] [--device cpu|cuda] [--threads N] [--prompt N] [--decode N] [--runs N]
 *                 [--compare-cpu 1] [--isa LIST] [--adapter DIR] [--ranks LIST --rounds N] [--score N]
 *                 [--perplexity N] [--concurrent LIST] */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../unit/test_adapter_util.h"
#include "decoder/cpu_isa.h"
#include "decoder/decoder.h"
#include "decoder/forward_cuda.h"
#include "decoder/lora.h"
#include "core/clock.h"

static double thread_cpu_s(void) { /* the calling thread's CPU time: with one thread, the work a step did */
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what, const cq_err *err) {
    fprintf(stderr, "bench_decoder: %s: %s\n", what, err->msg);
    exit(1);
}

/* Weight bytes a decode step reads: the layers in bf16 (the GPU's format) and the tied output matrix in bf16, or
 * as Q8_0 (1 byte a weight and a 2-byte scale per 32), which the GPU keeps when the file stores it so. */
static double weight_bytes(const cq_decoder_info *i, bool output_q8) {
    const double d = i->n_embd, qd = (double)i->n_head * i->head_dim, kvd = (double)i->n_head_kv * i->head_dim;
    const double layer = d * qd * 2 + d * kvd * 2 + d * i->n_ff * 3;
    return 2.0 * layer * i->n_layer + (double)i->n_vocab * d * (output_q8 ? 1.0 + 2.0 / 32 : 2.0);
}

/* The same prompt, greedy, on the CPU and the GPU: the continuations, argmax agreement, logits error. */
static void compare_cpu(const char *model, int n_steps) {
    cq_err err = {0};
    cq_decoder *dc, *dg;
    cq_decoder_options oc = {CQ_DEVICE_CPU, 0, false}, og = {CQ_DEVICE_CUDA, 0, false};
    if (cq_decoder_open(model, &oc, &dc, &err)) die("open (cpu)", &err);
    if (cq_decoder_open(model, &og, &dg, &err)) die("open (cuda)", &err);
    const cq_tokenizer *tok = cq_decoder_tokenizer(dc);
    const int V = cq_decoder_get_info(dc)->n_vocab;
    const char *prompt = "第一条 为了保护劳动者的合法权益，调整劳动关系，建立和维护适应社会主义市场经济的劳动制度，"
                         "根据宪法，制定本法。\n第二条";
    int32_t *ids;
    size_t n;
    if (cq_tokenizer_encode(tok, prompt, strlen(prompt), CQ_TOK_ADD_BOS, &ids, &n, &err)) die("encode", &err);
    cq_decoder_seq *sc, *sg, *sg2;
    if (cq_decoder_seq_new(dc, (int32_t)n + n_steps + 1, &sc, &err) ||
        cq_decoder_seq_new(dg, (int32_t)n + n_steps + 1, &sg, &err) ||
        cq_decoder_seq_new(dg, (int32_t)n + n_steps + 1, &sg2, &err))
        die("seq", &err);
    float *lc = malloc((size_t)V * 4), *lg = malloc((size_t)V * 4);
    if (cq_decoder_eval(sc, ids, n - 1, NULL, false, &err) || cq_decoder_eval(sg, ids, n - 1, NULL, false, &err) ||
        cq_decoder_eval(sg2, ids, n - 1, NULL, false, &err))
        die("prefill", &err);
    int32_t *out_c = malloc((size_t)n_steps * 4), *out_g = malloc((size_t)n_steps * 4);
    int32_t tc = ids[n - 1], tg = ids[n - 1];
    int agree = 0, free_agree = 0;
    bool diverged = false;
    double worst = 0;
    for (int i = 0; i < n_steps; i++) {
        int32_t gpu_next, free_next;
        /* teacher-forced: the GPU sees the CPU's tokens, so each step compares the same context */
        if (cq_decoder_eval(sc, &tc, 1, lc, false, &err) || cq_decoder_eval(sg, &tc, 1, lg, false, &err))
            die("step", &err);
        if (cq_decoder_eval_greedy(sg2, tg, &free_next, &err)) die("greedy step", &err);
        double e = 0, r = 0;
        for (int v = 0; v < V; v++) e += (double)(lg[v] - lc[v]) * (lg[v] - lc[v]), r += (double)lc[v] * lc[v];
        if (e / r > worst) worst = e / r;
        gpu_next = argmax(lg, V);
        int32_t cpu_next = argmax(lc, V);
        agree += gpu_next == cpu_next;
        out_c[i] = cpu_next;
        out_g[i] = free_next; /* the GPU left to itself: greedy on the GPU, fed its own tokens */
        if (!diverged && free_next == cpu_next) free_agree++;
        else diverged = true;
        tc = cpu_next;
        tg = free_next;
    }
    char *text_c, *text_g;
    size_t len_c, len_g;
    cq_tokenizer_decode(tok, out_c, (size_t)n_steps, false, &text_c, &len_c, &err);
    cq_tokenizer_decode(tok, out_g, (size_t)n_steps, false, &text_g, &len_g, &err);
    printf("compare CPU vs GPU, %zu-token prompt, %d greedy steps:\n", n, n_steps);
    printf("  teacher-forced argmax agreement %d/%d, worst logits NMSE %.2e\n", agree, n_steps, worst);
    printf("  free-running GPU greedy (argmax on the GPU) equal to the CPU's first %d tokens\n", free_agree);
    printf("  CPU: %.*s\n  GPU: %.*s\n", (int)len_c, text_c, (int)len_g, text_g);
    free(text_c), free(text_g), free(out_c), free(out_g), free(lc), free(lg), free(ids);
    cq_decoder_seq_free(sc), cq_decoder_seq_free(sg), cq_decoder_seq_free(sg2);
    cq_decoder_close(dc), cq_decoder_close(dg);
}

/* --isa: rounds of (prefill, decode) alternating the kernels' instruction set; a table of medians and ranges. */
static void compare_isa(cq_decoder *d, const char *list, const int32_t *ids, int n_prompt, int n_decode, int rounds) {
    cq_isa levels[3];
    int n_levels = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok && n_levels < 3; tok = strtok(NULL, ",")) {
        cq_isa l = !strcmp(tok, "scalar") ? CQ_ISA_SCALAR : !strcmp(tok, "avx2") ? CQ_ISA_AVX2 : CQ_ISA_AVX512;
        if (l > cq_isa_detected()) {
            fprintf(stderr, "bench_decoder: this CPU does not run %s; skipped\n", tok);
            continue;
        }
        levels[n_levels++] = l;
    }
    const int V = cq_decoder_get_info(d)->n_vocab;
    float *logits = malloc((size_t)V * sizeof *logits);
    double *tp = malloc((size_t)rounds * 3 * sizeof *tp), *td = malloc((size_t)rounds * 3 * sizeof *td);
    cq_decoder_seq *s;
    cq_err err = {0};
    if (cq_decoder_seq_new(d, n_prompt + n_decode + 8, &s, &err)) die("seq", &err);
    /* warm-up: pages of the weights, the KV cache and the scratch touched once */
    if (cq_decoder_eval(s, ids, (size_t)n_prompt, logits, false, &err) || cq_decoder_eval(s, ids, 1, logits, false, &err))
        die("warm-up", &err);
    for (int r = 0; r < rounds; r++) {
        for (int li = 0; li < n_levels; li++) {
            cq_isa_set(levels[li]);
            cq_decoder_seq_reset(s);
            double t0 = cq_clock_seconds();
            if (cq_decoder_eval(s, ids, (size_t)n_prompt, logits, false, &err)) die("prefill", &err);
            tp[li * rounds + r] = cq_clock_seconds() - t0;
            int32_t next = argmax(logits, V);
            t0 = cq_clock_seconds();
            for (int i = 0; i < n_decode; i++) {
                if (cq_decoder_eval(s, &next, 1, logits, false, &err)) die("decode", &err);
                next = argmax(logits, V);
            }
            td[li * rounds + r] = cq_clock_seconds() - t0;
            printf("round %d %-12s prefill %7.1f tok/s  decode %6.1f tok/s\n", r + 1, cq_isa_name(levels[li]),
                   n_prompt / tp[li * rounds + r], n_decode / td[li * rounds + r]);
            fflush(stdout);
        }
    }
    printf("%-12s %28s %28s\n", "kernels", "prefill tok/s median (range)", "decode tok/s median (range)");
    for (int li = 0; li < n_levels; li++) {
        double *a = tp + li * rounds, *b = td + li * rounds;
        qsort(a, (size_t)rounds, sizeof *a, cmp_double);
        qsort(b, (size_t)rounds, sizeof *b, cmp_double);
        char c1[64], c2[64];
        snprintf(c1, sizeof c1, "%.1f (%.1f-%.1f)", n_prompt / a[rounds / 2], n_prompt / a[rounds - 1], n_prompt / a[0]);
        snprintf(c2, sizeof c2, "%.1f (%.1f-%.1f)", n_decode / b[rounds / 2], n_decode / b[rounds - 1], n_decode / b[0]);
        printf("%-12s %28s %28s\n", cq_isa_name(levels[li]), c1, c2);
    }
    cq_decoder_seq_free(s);
    free(logits), free(tp), free(td);
}

/* n prompts of len tokens (different ones), scored packed and one at a time, runs times each alternating. */
static void bench_score(cq_decoder *d, const int32_t *ids, int len, int n, int runs) {
    const cq_decoder_info *info = cq_decoder_get_info(d);
    cq_err err = {0};
    int32_t **prompts = malloc((size_t)n * sizeof *prompts);
    size_t *lens = malloc((size_t)n * sizeof *lens);
    for (int i = 0; i < n; i++) { /* the text shifted by i tokens, BOS first */
        prompts[i] = malloc((size_t)len * sizeof(int32_t));
        prompts[i][0] = ids[0];
        for (int t = 1; t < len; t++) prompts[i][t] = ids[1 + (t + i) % (len - 1)];
        lens[i] = (size_t)len;
    }
    const int32_t yes_no[2] = {ids[1], ids[2]};
    float *out = malloc((size_t)n * 2 * sizeof *out), *logits = malloc((size_t)info->n_vocab * sizeof *logits);
    double *tp = malloc((size_t)runs * sizeof *tp), *ts = malloc((size_t)runs * sizeof *ts);
    cq_decoder_seq *s;
    if (cq_decoder_seq_new(d, len, &s, &err)) die("seq", &err);
    for (int r = -1; r < runs; r++) { /* run -1: warm-up */
        double t0 = cq_clock_seconds();
        if (cq_decoder_score_prompts(d, (const int32_t *const *)prompts, lens, (size_t)n, yes_no, 2, out, &err))
            die("score", &err);
        double t1 = cq_clock_seconds();
        for (int i = 0; i < n; i++) {
            cq_decoder_seq_reset(s);
            if (cq_decoder_eval(s, prompts[i], lens[i], logits, false, &err)) die("prefill", &err);
        }
        double t2 = cq_clock_seconds();
        if (r >= 0) tp[r] = t1 - t0, ts[r] = t2 - t1;
    }
    qsort(tp, (size_t)runs, sizeof *tp, cmp_double);
    qsort(ts, (size_t)runs, sizeof *ts, cmp_double);
    printf("score %d prompts of %d tokens (%d tokens): cq_decoder_score_prompts %.2f ms (min %.2f; %.0f tok/s), one "
           "at a time %.2f ms (min %.2f), median of %d\n", n, len, n * len, tp[runs / 2] * 1e3, tp[0] * 1e3,
           n * len / tp[runs / 2], ts[runs / 2] * 1e3, ts[0] * 1e3, runs);
    for (int i = 0; i < n; i++) free(prompts[i]);
    free(prompts), free(lens), free(out), free(logits), free(tp), free(ts);
    cq_decoder_seq_free(s);
}

#define MAX_RANKS 8

/* Adapters of several ranks compared on one box at one time: one decoder per rank (each its own copy of the
 * weights), the same prompt prefilled by each in turn, then decode steps interleaved token by token (rank a's step,
 * rank b's step, ...; argmax on the host, or on the GPU), so that the box's load hits every rank alike. Reports per
 * rank the median prefill rate, the median step time, and the median over steps of its time relative to the step
 * of the list's first rank (0: no adapter) next to it (wall; and the calling thread's CPU time, which with
 * --threads 1 is the step's work whatever else the box runs; the quartiles of the wall ratio in
 * parentheses). rounds: prefill + n_decode steps, that many times. */
static void compare_ranks(const char *model, const cq_decoder_options *opt, const char *list, int rounds,
                          const int32_t *ids, int n_prompt, int n_decode) {
    int ranks[MAX_RANKS], n_ranks = 0;
    char dirs[MAX_RANKS][128];
    char sha[65];
    cq_err err = {0};
    cq_decoder *d[MAX_RANKS];
    cq_decoder_seq *s[MAX_RANKS];
    if (cq_model_file_sha256(model, sha, &err)) die("model digest", &err);
    for (const char *p = list; *p && n_ranks < MAX_RANKS; p += strspn(p, ",")) {
        const int k = n_ranks++;
        ranks[k] = atoi(p);
        p += strcspn(p, ",");
        if (cq_decoder_open(model, opt, &d[k], &err)) die("open", &err);
        if (cq_decoder_seq_new(d[k], n_prompt + n_decode + 8, &s[k], &err)) die("seq", &err);
        if (ranks[k] > 0) {
            snprintf(dirs[k], sizeof dirs[k], "/tmp/cq_bench_adapter_r%d_%d", ranks[k], (int)getpid());
            test_adapter_spec spec = {.rank = ranks[k], .alpha = 2.0f * ranks[k], .base_sha256 = sha};
            if (test_write_adapter(dirs[k], cq_decoder_get_info(d[k]), &spec, NULL)) exit(1);
            if (cq_decoder_load_adapter(d[k], dirs[k], &err)) die("adapter", &err);
            test_rm_adapter(dirs[k]);
        }
    }
    const cq_decoder_info *info = cq_decoder_get_info(d[0]);
    const bool gpu = info->device == CQ_DEVICE_CUDA;
    const int n_steps = rounds * n_decode;
    double *pre = calloc((size_t)n_ranks * rounds, sizeof *pre), *step = calloc((size_t)n_ranks * n_steps, sizeof *step);
    double *rel = calloc((size_t)n_steps, sizeof *rel), *sorted = calloc((size_t)n_steps, sizeof *sorted);
    double *cpu = calloc((size_t)n_ranks * n_steps, sizeof *cpu), *rel_cpu = calloc((size_t)n_steps, sizeof *rel_cpu);
    float *logits = malloc((size_t)info->n_vocab * sizeof *logits);
    int32_t next[MAX_RANKS];
    for (int r = -1; r < rounds; r++) { /* round -1: warm-up */
        for (int j = 0; j < n_ranks; j++) {
            const int k = (j + (r < 0 ? 0 : r)) % n_ranks; /* each round another rank first */
            cq_decoder_seq_reset(s[k]);
            double t0 = cq_clock_seconds();
            if (cq_decoder_eval(s[k], ids, (size_t)n_prompt, logits, false, &err)) die("prefill", &err);
            if (r >= 0) pre[k * rounds + r] = n_prompt / (cq_clock_seconds() - t0);
            next[k] = argmax(logits, info->n_vocab);
        }
        for (int i = 0; i < n_decode; i++) {
            for (int j = 0; j < n_ranks; j++) {
                const int k = (j + i) % n_ranks;
                double t0 = cq_clock_seconds(), c0 = thread_cpu_s();
                if (gpu) {
                    if (cq_decoder_eval_greedy(s[k], next[k], &next[k], &err)) die("decode", &err);
                } else {
                    if (cq_decoder_eval(s[k], &next[k], 1, logits, false, &err)) die("decode", &err);
                    next[k] = argmax(logits, info->n_vocab);
                }
                if (r >= 0) {
                    step[(size_t)k * n_steps + (size_t)r * n_decode + i] = cq_clock_seconds() - t0;
                    cpu[(size_t)k * n_steps + (size_t)r * n_decode + i] = thread_cpu_s() - c0;
                }
            }
        }
    }
    printf("adapter ranks, %d rounds of a %d-token prompt then %d decode steps, the ranks' steps interleaved (%s):\n",
           rounds, n_prompt, n_decode, gpu ? "argmax on the GPU" : "logits to the host");
    printf("%6s %28s %12s %12s %26s %16s %10s\n", "rank", "prefill tok/s med (min-max)", "step ms med",
           "decode tok/s", "step time / first's", "its CPU / first's", "factor MB");
    for (int k = 0; k < n_ranks; k++) {
        for (int i = 0; i < n_steps; i++) rel[i] = step[(size_t)k * n_steps + i] / step[i];
        for (int i = 0; i < n_steps; i++) rel_cpu[i] = cpu[(size_t)k * n_steps + i] / cpu[i];
        qsort(rel, (size_t)n_steps, sizeof *rel, cmp_double);
        qsort(rel_cpu, (size_t)n_steps, sizeof *rel_cpu, cmp_double);
        qsort(pre + k * rounds, (size_t)rounds, sizeof *pre, cmp_double);
        double *sk = sorted;
        memcpy(sk, step + (size_t)k * n_steps, (size_t)n_steps * sizeof *sk);
        qsort(sk, (size_t)n_steps, sizeof *sk, cmp_double);
        /* bf16 A (rank, in) and B (out, rank) of all seven projections of every layer, per unit of rank */
        const double qd = (double)info->n_head * info->head_dim, kvd = (double)info->n_head_kv * info->head_dim;
        const double per_rank = 2.0 * info->n_layer * (7.0 * info->n_embd + 2 * qd + 2 * kvd + 3.0 * info->n_ff);
        printf("%6d %12.1f (%6.1f-%6.1f) %12.3f %12.1f %12.3f (%.3f-%.3f) %16.3f %10.1f\n", ranks[k],
               pre[k * rounds + rounds / 2], pre[k * rounds], pre[k * rounds + rounds - 1],
               sk[n_steps / 2] * 1e3, 1.0 / sk[n_steps / 2], rel[n_steps / 2], rel[n_steps / 4], rel[3 * n_steps / 4],
               rel_cpu[n_steps / 2], ranks[k] * per_rank / 1e6);
    }
    for (int k = 0; k < n_ranks; k++) cq_decoder_seq_free(s[k]), cq_decoder_close(d[k]);
    free(pre), free(step), free(rel), free(sorted), free(cpu), free(rel_cpu), free(logits);
}

/* --concurrent: one thread's sequence, stepped after a shared start. */
typedef struct {
    cq_decoder_seq *s;
    int32_t first;
    int n_decode;
    pthread_barrier_t *start;
    double done_s;
    cq_status st;
} conc_job;

static void *conc_main(void *arg) {
    conc_job *j = arg;
    cq_err err = {0};
    const cq_top_request req = {CQ_TOP_MAX, 0, {0}};
    cq_top top;
    pthread_barrier_wait(j->start);
    int32_t next = j->first;
    for (int i = 0; i < j->n_decode && !j->st; i++) {
        j->st = cq_decoder_eval_top(j->s, &next, 1, &req, &top, &err);
        next = top.top_ids[0];
    }
    if (j->st) fprintf(stderr, "decode: %s\n", err.msg);
    j->done_s = cq_clock_seconds();
    return NULL;
}

static void bench_concurrent(cq_decoder *d, const char *list, const int32_t *ids, int n_prompt, int n_decode,
                             int runs) {
    printf("concurrent decode (cq_decoder_eval_top, %d candidates a step), after a %d-token prompt each, %d steps, "
           "median of %d runs\n",
           CQ_TOP_MAX, n_prompt, n_decode, runs);
    printf("%8s %16s %16s %12s %12s\n", "streams", "aggregate tok/s", "per stream tok/s", "mean batch", "wall ms");
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        const int n = atoi(tok);
        if (n < 1) continue;
        conc_job *jobs = calloc((size_t)n, sizeof *jobs);
        pthread_t *th = calloc((size_t)n, sizeof *th);
        double *wall = calloc((size_t)runs, sizeof *wall), mean_batch = 0;
        cq_err err = {0};
        for (int i = 0; i < n; i++)
            if (cq_decoder_seq_new(d, n_prompt + n_decode + 1, &jobs[i].s, &err)) die("seq", &err);
        for (int r = 0; r < runs; r++) {
            pthread_barrier_t start;
            pthread_barrier_init(&start, NULL, (unsigned)n + 1);
            const cq_top_request req = {1, 0, {0}};
            cq_top top;
            for (int i = 0; i < n; i++) {
                cq_decoder_seq_reset(jobs[i].s);
                if (cq_decoder_eval_top(jobs[i].s, ids, (size_t)n_prompt, &req, &top, &err)) die("prefill", &err);
                jobs[i].first = top.top_ids[0], jobs[i].n_decode = n_decode, jobs[i].start = &start, jobs[i].st = CQ_OK;
                if (pthread_create(&th[i], NULL, conc_main, &jobs[i])) {
                    fprintf(stderr, "pthread_create failed\n");
                    exit(1);
                }
            }
            cq_decoder_stats s0, s1;
            cq_decoder_get_stats(d, &s0);
            pthread_barrier_wait(&start);
            const double t0 = cq_clock_seconds();
            double last = t0;
            for (int i = 0; i < n; i++) {
                pthread_join(th[i], NULL);
                if (jobs[i].st) exit(1);
                last = jobs[i].done_s > last ? jobs[i].done_s : last;
            }
            cq_decoder_get_stats(d, &s1);
            wall[r] = last - t0;
            if (r == runs / 2) mean_batch = (double)(s1.steps - s0.steps) / (double)(s1.forwards - s0.forwards);
            pthread_barrier_destroy(&start);
        }
        double *sorted = malloc((size_t)runs * sizeof *sorted);
        memcpy(sorted, wall, (size_t)runs * sizeof *sorted);
        qsort(sorted, (size_t)runs, sizeof *sorted, cmp_double);
        const double w = sorted[runs / 2];
        printf("%8d %16.0f %16.1f %12.1f %12.1f\n", n, (double)n * n_decode / w, n_decode / w, mean_batch, w * 1e3);
        fflush(stdout);
        for (int i = 0; i < n; i++) cq_decoder_seq_free(jobs[i].s);
        free(jobs), free(th), free(wall), free(sorted);
    }
}

int main(int argc, char **argv) {
    const char *model = "data/models/gemma-3-270m-q4_k_m.gguf";
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    static char path[4096];
    if (src) {
        snprintf(path, sizeof path, "%s/%s", src, model);
        model = path;
    }
    cq_decoder_options opt = {CQ_DEVICE_CPU, 0, false};
    int n_prompt = 512, n_decode = 64, runs = 5, compare = 0, rounds = 5, score = 0, n_perplexity = 64;
    const char *isa = NULL, *adapter = NULL, *ranks = NULL, *concurrent = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--threads")) opt.n_threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prompt")) n_prompt = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--decode")) n_decode = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--runs")) runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--compare-cpu")) compare = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--isa")) isa = argv[i + 1];
        else if (!strcmp(argv[i], "--perplexity")) n_perplexity = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--adapter")) adapter = argv[i + 1];
        else if (!strcmp(argv[i], "--ranks")) ranks = argv[i + 1];
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--score")) score = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--concurrent")) concurrent = argv[i + 1];
        else if (!strcmp(argv[i], "--device")) opt.device = !strcmp(argv[i + 1], "cuda") ? CQ_DEVICE_CUDA : CQ_DEVICE_CPU;
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (runs < 1) runs = 1;
    cq_err err = {0};
    cq_decoder *d;
    double t0 = cq_clock_seconds();
    if (cq_decoder_open(model, &opt, &d, &err)) die("open", &err);
    double t_open = cq_clock_seconds() - t0, t_adapter = 0;
    if (adapter) {
        t0 = cq_clock_seconds();
        if (cq_decoder_load_adapter(d, adapter, &err)) die("adapter", &err);
        t_adapter = cq_clock_seconds() - t0;
    }
    const cq_decoder_info *info = cq_decoder_get_info(d);
    const bool gpu = info->device == CQ_DEVICE_CUDA;
    /* A prompt of real text: repeat a legal sentence until n_prompt tokens. */
    const char *sentence = "第一条 为了保护劳动者的合法权益，调整劳动关系，根据宪法，制定本法。 Article 1. This Agreement "
                           "governs the termination of employment and the payment of overtime. ";
    int32_t *ids = malloc((size_t)(n_prompt + n_decode) * sizeof *ids), *piece;
    size_t n_piece, have = 0;
    cq_tokenizer_encode(cq_decoder_tokenizer(d), sentence, strlen(sentence), 0, &piece, &n_piece, &err);
    ids[have++] = cq_tokenizer_bos(cq_decoder_tokenizer(d));
    for (; have < (size_t)n_prompt; have++) ids[have] = piece[(have - 1) % n_piece];
    free(piece);
    if (isa && !gpu) {
        compare_isa(d, isa, ids, n_prompt, n_decode, runs);
        free(ids);
        cq_decoder_close(d);
        return 0;
    }
    if (concurrent) {
        bench_concurrent(d, concurrent, ids, n_prompt, n_decode, runs);
        free(ids);
        cq_decoder_close(d);
        return 0;
    }
    if (score > 0) {
        bench_score(d, ids, n_prompt, score, runs);
        free(ids);
        cq_decoder_close(d);
        return 0;
    }
    if (ranks) {
        cq_decoder_close(d);
        compare_ranks(model, &opt, ranks, rounds > 0 ? rounds : 1, ids, n_prompt, n_decode);
        free(ids);
        return 0;
    }
    float *logits = malloc((size_t)info->n_vocab * sizeof *logits);
    cq_decoder_seq *s;
    if (cq_decoder_seq_new(d, n_prompt + n_decode + 72, &s, &err)) die("seq", &err);
    /* warm-up: page in the weights, let the GPU path capture its graphs (twice: the prefill graph is captured at
     * the second full chunk) */
    for (int w = 0; w < (gpu ? 2 : 1); w++) {
        cq_decoder_seq_reset(s);
        cq_decoder_eval(s, ids, (size_t)n_prompt, logits, false, &err);
        int32_t next;
        cq_decoder_eval(s, ids, 1, logits, false, &err);
        if (gpu) cq_decoder_eval_greedy(s, ids[1], &next, &err);
    }

    double t_fresh = 0; /* a new sequence, as an ask makes: its full chunks run directly, no graphs yet */
    if (gpu) {
        cq_decoder_seq *fresh;
        if (cq_decoder_seq_new(d, n_prompt + n_decode + 72, &fresh, &err)) die("seq", &err);
        t0 = cq_clock_seconds();
        if (cq_decoder_eval(fresh, ids, (size_t)n_prompt, logits, false, &err)) die("prefill", &err);
        t_fresh = cq_clock_seconds() - t0;
        cq_decoder_seq_free(fresh);
    }
    double *t_runs = malloc((size_t)runs * sizeof *t_runs);
    for (int r = 0; r < runs; r++) {
        cq_decoder_seq_reset(s);
        t0 = cq_clock_seconds();
        if (cq_decoder_eval(s, ids, (size_t)n_prompt, logits, false, &err)) die("prefill", &err);
        t_runs[r] = cq_clock_seconds() - t0;
    }
    qsort(t_runs, (size_t)runs, sizeof *t_runs, cmp_double);
    const double t_prefill = t_runs[runs / 2];
    int32_t first = argmax(logits, info->n_vocab);
    t0 = cq_clock_seconds();
    for (int i = 0, next = first; i < n_decode; i++) {
        if (cq_decoder_eval(s, &next, 1, logits, false, &err)) die("decode", &err);
        next = argmax(logits, info->n_vocab);
    }
    double t_decode = cq_clock_seconds() - t0, t_greedy = 0;
    if (gpu) { /* the same steps with the argmax on the GPU */
        cq_decoder_seq_reset(s);
        if (cq_decoder_eval(s, ids, (size_t)n_prompt, NULL, false, &err)) die("prefill", &err);
        t0 = cq_clock_seconds();
        for (int i = 0, next = first; i < n_decode; i++)
            if (cq_decoder_eval_greedy(s, next, &next, &err)) die("greedy decode", &err);
        t_greedy = cq_clock_seconds() - t0;
    }
    /* scoring: n_perplexity tokens with logits at every position (the perplexity path) */
    if (n_perplexity > n_prompt) n_perplexity = n_prompt;
    float *all = n_perplexity > 0 ? malloc((size_t)n_perplexity * info->n_vocab * sizeof *all) : NULL;
    double t_score = 0;
    if (n_perplexity > 0) {
        cq_decoder_seq_reset(s);
        t0 = cq_clock_seconds();
        cq_decoder_eval(s, ids, (size_t)n_perplexity, all, true, &err);
        t_score = cq_clock_seconds() - t0;
    }

    printf("decoder benchmark: %s (%d layers, d=%d, vocab %d), device %s, %d threads\n", info->name, info->n_layer,
           info->n_embd, info->n_vocab, gpu ? "cuda" : "cpu", opt.n_threads);
    printf("%-38s %10s %12s\n", "phase", "tokens", "tokens/s");
    printf("%-38s %10s %12.2f s\n", "open (map, tokenizer, upload)", "-", t_open);
    if (adapter) {
        const cq_adapter_info *ai = cq_decoder_adapter(d);
        printf("%-38s %10s %12.2f s   (%s, rank %d, %d projections)\n", "adapter (read, check, prepare)", "-", t_adapter,
               ai->name, ai->rank, ai->n_adapted);
    }
    printf("%-38s %10d %12.1f   (%.2f ms: time to first token; median of %d, min %.2f ms)\n", "prefill (last logits)",
           n_prompt, n_prompt / t_prefill, t_prefill * 1e3, runs, t_runs[0] * 1e3);
    if (gpu)
        printf("%-38s %10d %12.1f   (%.2f ms: time to first token)\n", "prefill, fresh sequence (no graphs)", n_prompt,
               n_prompt / t_fresh, t_fresh * 1e3);
    printf("%-38s %10d %12.1f\n", "decode (full logits to host, batch 1)", n_decode, n_decode / t_decode);
    if (gpu) printf("%-38s %10d %12.1f\n", "decode (greedy, argmax on GPU)", n_decode, n_decode / t_greedy);
    if (n_perplexity > 0) printf("%-38s %10d %12.1f\n", "score (logits at every position)", n_perplexity, n_perplexity / t_score);
    if (gpu) {
        double copy = 0;
        if (cq_cuda_copy_bandwidth((size_t)1 << 30, &copy, &err)) die("copy bandwidth", &err);
        const double step = t_greedy / n_decode;
        printf("device-to-device copy (1 GiB, read + write): %.0f GB/s\n", copy);
        printf("greedy step: %.1f us\n", step * 1e6);
        for (int q8 = 0; q8 < 2; q8++) {
            const double wb = weight_bytes(info, q8);
            printf("  weights %.1f MB/token (output matrix %s) -> %.0f GB/s achieved (%.0f%% of copy); bound %.0f "
                   "tok/s\n",
                   wb / 1e6, q8 ? "Q8_0, if the file has it so" : "bf16", wb / step / 1e9,
                   100.0 * wb / step / 1e9 / copy, copy * 1e9 / wb);
        }
        /* the layout of cq_cuda_seq_new: local layers a ring of window + batch slots, global ones every position */
        const char *kv16 = getenv("CLAUSEQA_KV_BF16"); /* the cache's type (cq_cuda_model_set_kv_bf16) */
        const bool bf = kv16 && *kv16 && strcmp(kv16, "0");
        const double ctx = 32768, kv_tok = 2.0 * info->n_head_kv * info->head_dim * (bf ? 2 : sizeof(float));
        const double ring = info->sliding_window + CQ_CUDA_BATCH < ctx ? info->sliding_window + CQ_CUDA_BATCH : ctx;
        const int n_local = info->n_layer - info->n_global_layers;
        printf("KV cache at a 32k context (%s K and V): global %d x %.0f x %.0f B = %.1f MiB, local %d x %.0f "
               "slots x %.0f B = %.1f MiB\n",
               bf ? "bf16, CLAUSEQA_KV_BF16" : "float32", info->n_global_layers, ctx, kv_tok, info->n_global_layers * ctx * kv_tok / 1048576.0, n_local, ring,
               kv_tok, n_local * ring * kv_tok / 1048576.0);
    }
    free(all);
    free(logits);
    free(ids);
    free(t_runs);
    cq_decoder_seq_free(s);
    cq_decoder_close(d);
    if (compare && gpu) compare_cpu(model, 32);
    return 0;
}
