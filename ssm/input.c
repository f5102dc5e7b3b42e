/* The network's input rows (docs/SSM.md, "Input layer").
 *
 * Built-in table (cq-hash-v1): x0 = embedding[id].
 * External vocabulary: x0 = markers[id] for the markers 0..4, else proj · table[id] (d_model × n_embd times the lent
 * table's row). The projected row depends on the id alone, so it is computed the first time an id is seen and kept:
 * a document of legal text uses a few thousand distinct ids, so after the first documents the input layer costs a
 * copy, as the built-in table does. The cache is one pointer per id, published with a compare-and-swap, so encoders
 * on several threads may share the model: two threads meeting a new id both compute it, one keeps its row. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ssm/ssm_internal.h"

enum { N_MARKERS = 5 };

typedef _Atomic(float *) row_slot;

cq_status cq_ssm_row_cache_new(cq_ssm_model *m, cq_err *err) {
    if (!m->vocab) return CQ_OK;
    m->row_cache = calloc((size_t)m->cfg.vocab_size, sizeof(row_slot));
    return m->row_cache ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory for the input row cache");
}

void cq_ssm_row_cache_free(cq_ssm_model *m) {
    row_slot *slots = (row_slot *)m->row_cache;
    if (!slots) return;
    for (int32_t i = 0; i < m->cfg.vocab_size; i++) free(atomic_load(&slots[i]));
    free(slots);
    m->row_cache = NULL;
}

/* proj · table[id] into a new row (d_model floats); NULL when out of memory. */
static float *project_row(const cq_ssm_model *m, int32_t id) {
    const size_t dm = (size_t)m->cfg.d_model, ne = (size_t)m->cfg.token_embd_dim;
    float *row = malloc(dm * sizeof *row), *e = malloc(ne * sizeof *e);
    if (!row || !e) {
        free(row);
        free(e);
        return NULL;
    }
    m->vocab->row(m->vocab->ctx, id, e);
    for (size_t r = 0; r < dm; r++) {
        const float *w = m->embd_proj + r * ne;
        float acc = 0.0f;
        for (size_t k = 0; k < ne; k++) acc += w[k] * e[k];
        row[r] = acc;
    }
    free(e);
    return row;
}

cq_status cq_ssm_embed(const cq_ssm_model *m, const int32_t *tokens, size_t n, float *x, cq_err *err) {
    const size_t dm = (size_t)m->cfg.d_model;
    if (!m->vocab) {
        for (size_t t = 0; t < n; t++) memcpy(x + t * dm, m->embedding + (size_t)tokens[t] * dm, dm * sizeof(float));
        return CQ_OK;
    }
    row_slot *slots = (row_slot *)m->row_cache; /* made at load, before the model is shared */
    for (size_t t = 0; t < n; t++) {
        int32_t id = tokens[t];
        if (id < N_MARKERS) {
            memcpy(x + t * dm, m->markers + (size_t)id * dm, dm * sizeof(float));
            continue;
        }
        float *row = atomic_load_explicit(&slots[id], memory_order_acquire);
        if (!row) {
            float *mine = project_row(m, id), *expected = NULL;
            if (!mine) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory for the input row of token %d", (int)id);
            if (atomic_compare_exchange_strong_explicit(&slots[id], &expected, mine, memory_order_acq_rel,
                                                        memory_order_acquire)) {
                row = mine;
            } else {
                free(mine);
                row = expected;
            }
        }
        memcpy(x + t * dm, row, dm * sizeof(float));
    }
    return CQ_OK;
}
