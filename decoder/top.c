#include "decoder/top.h"

#include <math.h>

void cq_top_from_logits(const float *logits, int32_t n_vocab, const cq_top_request *req, cq_top *out) {
    const int k = req->k < 1 ? 1 : req->k > CQ_TOP_MAX ? CQ_TOP_MAX : req->k;
    int have = 0;
    float mx = logits[0];
    for (int32_t i = 0; i < n_vocab; i++) {
        const float v = logits[i];
        if (v > mx) mx = v;
        if (have == k && v <= out->top_logits[k - 1]) continue; /* an equal logit keeps the earlier id */
        int j = have < k ? have++ : k - 1;
        while (j > 0 && out->top_logits[j - 1] < v) {
            out->top_ids[j] = out->top_ids[j - 1];
            out->top_logits[j] = out->top_logits[j - 1];
            j--;
        }
        out->top_ids[j] = i;
        out->top_logits[j] = v;
    }
    out->n = have;
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)(logits[i] - mx));
    out->lse = (double)mx + log(sum);
    for (int j = 0; j < req->n_ids && j < CQ_TOP_MAX_IDS; j++) out->id_logits[j] = logits[req->ids[j]];
}
