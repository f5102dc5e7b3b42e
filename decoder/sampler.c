#include "decoder/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

cq_sampler_params cq_sampler_defaults(void) {
    return (cq_sampler_params){.temperature = 0, .top_k = 0, .top_p = 1, .repetition_penalty = 1,
                               .repetition_window = 64, .seed = 0x5eed};
}

cq_status cq_sampler_init(cq_sampler *s, const cq_sampler_params *p, int32_t n_vocab, cq_err *err) {
    memset(s, 0, sizeof *s);
    s->p = p ? *p : cq_sampler_defaults();
    if (!(s->p.temperature >= 0) || s->p.top_k < 0 || !(s->p.top_p > 0 && s->p.top_p <= 1) ||
        !(s->p.repetition_penalty > 0) || s->p.repetition_window < 0)
        return cq_err_set(err, CQ_ERR_INVALID, "sampler: temperature >= 0, top_k >= 0, 0 < top_p <= 1 and "
                          "repetition_penalty > 0 are required");
    s->n_vocab = n_vocab;
    s->rng = s->p.seed ? s->p.seed : 0x9e3779b97f4a7c15ull;
    s->prob = malloc((size_t)n_vocab * sizeof *s->prob);
    s->idx = malloc((size_t)n_vocab * sizeof *s->idx);
    s->seen = calloc((size_t)n_vocab, 1);
    if (!s->prob || !s->idx || !s->seen) {
        cq_sampler_free(s);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    return CQ_OK;
}

void cq_sampler_free(cq_sampler *s) {
    free(s->prob);
    free(s->idx);
    free(s->seen);
    s->prob = NULL;
    s->idx = NULL;
    s->seen = NULL;
}

static double next_uniform(cq_sampler *s) { /* [0, 1) */
    s->rng ^= s->rng >> 12, s->rng ^= s->rng << 25, s->rng ^= s->rng >> 27;
    return (double)((s->rng * 0x2545f4914f6cdd1dull) >> 11) * 0x1p-53;
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static void swap(cq_sampler *s, int32_t a, int32_t b) {
    int32_t i = s->idx[a];
    s->idx[a] = s->idx[b], s->idx[b] = i;
    float p = s->prob[a];
    s->prob[a] = s->prob[b], s->prob[b] = p;
}

/* Partitions [lo, hi) so that the entries with value > pivot come first; returns their count. */
static int32_t partition_above(cq_sampler *s, int32_t lo, int32_t hi, float pivot) {
    int32_t i = lo;
    for (int32_t j = lo; j < hi; j++)
        if (s->prob[j] > pivot) swap(s, i++, j);
    return i - lo;
}

/* Moves the k largest of [0, n) to the front (any order), by quickselect: expected O(n). */
static void select_top(cq_sampler *s, int32_t n, int32_t k) {
    int32_t lo = 0, hi = n;
    while (hi - lo > 1 && k > 0 && k < hi - lo) {
        float pivot = s->prob[lo + (int32_t)(next_uniform(s) * (hi - lo))];
        int32_t above = partition_above(s, lo, hi, pivot);
        if (above == 0) { /* pivot is the maximum: gather the entries equal to it */
            int32_t eq = lo;
            for (int32_t j = lo; j < hi; j++)
                if (s->prob[j] == pivot) swap(s, eq++, j);
            if (eq - lo >= k) return;
            k -= eq - lo;
            lo = eq;
        } else if (above >= k) {
            hi = lo + above;
        } else {
            k -= above;
            lo += above;
        }
    }
}

/* Smallest prefix (after rearranging) of [0, n) whose mass reaches target: the nucleus, by quickselect on mass. */
static int32_t select_nucleus(cq_sampler *s, int32_t n, double target) {
    int32_t lo = 0, hi = n;
    while (hi - lo > 1) {
        float pivot = s->prob[lo + (int32_t)(next_uniform(s) * (hi - lo))];
        int32_t above = partition_above(s, lo, hi, pivot);
        double mass = 0;
        for (int32_t j = lo; j < lo + above; j++) mass += s->prob[j];
        if (above > 0 && mass >= target) {
            hi = lo + above;
            continue;
        }
        /* take everything above and the entries equal to the pivot, then continue below */
        lo += above;
        target -= mass;
        int32_t eq = lo;
        for (int32_t j = lo; j < hi; j++)
            if (s->prob[j] == pivot) swap(s, eq++, j);
        for (int32_t j = lo; j < eq; j++) target -= s->prob[j];
        lo = eq;
        if (target <= 0) return lo;
    }
    return hi;
}

int32_t cq_sampler_pick(cq_sampler *s, float *logits, const int32_t *history, size_t n_history) {
    const int32_t V = s->n_vocab;
    if (s->p.repetition_penalty != 1.0f) {
        size_t from = s->p.repetition_window && n_history > (size_t)s->p.repetition_window
                          ? n_history - (size_t)s->p.repetition_window : 0;
        /* CTRL rule, once per distinct token however often it occurs: positive logits are divided, negative
         * ones multiplied. seen[] is all zero between calls. */
        for (size_t i = from; i < n_history; i++) {
            int32_t t = history[i];
            if (t < 0 || t >= V || s->seen[t]) continue;
            s->seen[t] = 1;
            logits[t] = logits[t] > 0 ? logits[t] / s->p.repetition_penalty : logits[t] * s->p.repetition_penalty;
        }
        for (size_t i = from; i < n_history; i++)
            if (history[i] >= 0 && history[i] < V) s->seen[history[i]] = 0;
    }
    if (s->p.temperature <= 0) return argmax(logits, V);
    float mx = logits[argmax(logits, V)];
    double sum = 0;
    for (int32_t i = 0; i < V; i++) {
        s->idx[i] = i;
        s->prob[i] = expf((logits[i] - mx) / s->p.temperature);
        sum += s->prob[i];
    }
    int32_t n = V;
    if (s->p.top_k > 0 && s->p.top_k < V) {
        select_top(s, V, s->p.top_k);
        n = s->p.top_k;
        sum = 0;
        for (int32_t i = 0; i < n; i++) sum += s->prob[i];
    }
    if (s->p.top_p < 1.0f) {
        n = select_nucleus(s, n, s->p.top_p * sum);
        sum = 0;
        for (int32_t i = 0; i < n; i++) sum += s->prob[i];
    }
    double r = next_uniform(s) * sum;
    for (int32_t i = 0; i < n; i++) {
        r -= s->prob[i];
        if (r < 0) return s->idx[i];
    }
    return s->idx[n - 1];
}
