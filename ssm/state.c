/* A document's running state and its serialized form.
 *
 * Layout (little-endian): "CQSS", u32 version (1), u32 model fingerprint, u32 n_layer, u32 d_inner, u32 d_state,
 * u32 d_conv, u32 zero, i64 tokens read, then conv (n_layer × d_inner × (d_conv-1)) and h (n_layer × d_inner ×
 * d_state) as F32. The fingerprint ties a state to the model shape that wrote it; a state from another shape is
 * refused rather than resumed into nonsense. */
#include <stdlib.h>
#include <string.h>

#include "ssm/ssm_internal.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ssm/state.c writes the host's byte order and assumes it is little-endian"
#endif

#define STATE_MAGIC "CQSS"
#define STATE_VERSION 1u
#define STATE_HEADER_BYTES 40

static size_t conv_floats(const cq_ssm_model *m) {
    return (size_t)m->cfg.n_layer * m->d_inner * (m->cfg.d_conv - 1);
}
static size_t h_floats(const cq_ssm_model *m) { return (size_t)m->cfg.n_layer * m->d_inner * m->cfg.d_state; }

cq_status cq_ssm_state_new(const cq_ssm_model *m, cq_ssm_state **out, cq_err *err) {
    *out = NULL;
    cq_ssm_state *s = calloc(1, sizeof *s);
    if (!s) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    s->fingerprint = m->fingerprint;
    s->n_layer = m->cfg.n_layer;
    s->d_inner = m->d_inner;
    s->d_state = m->cfg.d_state;
    s->d_conv = m->cfg.d_conv;
    s->conv = calloc(conv_floats(m) + 1, sizeof(float));
    s->h = calloc(h_floats(m), sizeof(float));
    if (!s->conv || !s->h) {
        cq_ssm_state_free(s);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory for an SSM state");
    }
    *out = s;
    return CQ_OK;
}

void cq_ssm_state_free(cq_ssm_state *s) {
    if (!s) return;
    free(s->conv);
    free(s->h);
    free(s);
}

int64_t cq_ssm_state_tokens(const cq_ssm_state *s) { return s->n_tokens; }

size_t cq_ssm_state_size_bytes(const cq_ssm_model *m) {
    return STATE_HEADER_BYTES + (conv_floats(m) + h_floats(m)) * sizeof(float);
}

cq_status cq_ssm_state_save(const cq_ssm_state *s, void *buf, size_t cap, cq_err *err) {
    size_t nc = (size_t)s->n_layer * s->d_inner * (s->d_conv - 1), nh = (size_t)s->n_layer * s->d_inner * s->d_state;
    size_t need = STATE_HEADER_BYTES + (nc + nh) * sizeof(float);
    if (cap < need) return cq_err_set(err, CQ_ERR_INVALID, "SSM state needs %zu bytes, buffer has %zu", need, cap);
    unsigned char *p = buf;
    uint32_t hdr[8] = {0, STATE_VERSION, s->fingerprint, (uint32_t)s->n_layer, (uint32_t)s->d_inner,
                       (uint32_t)s->d_state, (uint32_t)s->d_conv, 0};
    memcpy(hdr, STATE_MAGIC, 4);
    memcpy(p, hdr, sizeof hdr);
    memcpy(p + 32, &s->n_tokens, 8);
    memcpy(p + STATE_HEADER_BYTES, s->conv, nc * sizeof(float));
    memcpy(p + STATE_HEADER_BYTES + nc * sizeof(float), s->h, nh * sizeof(float));
    return CQ_OK;
}

cq_status cq_ssm_state_load(const cq_ssm_model *m, const void *buf, size_t len, cq_ssm_state **out, cq_err *err) {
    *out = NULL;
    const unsigned char *p = buf;
    uint32_t hdr[8];
    if (len < STATE_HEADER_BYTES) return cq_err_set(err, CQ_ERR_FORMAT, "SSM state: %zu bytes is too short", len);
    memcpy(hdr, p, sizeof hdr);
    if (memcmp(p, STATE_MAGIC, 4)) return cq_err_set(err, CQ_ERR_FORMAT, "SSM state: bad magic");
    if (hdr[1] != STATE_VERSION)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "SSM state: version %u, this program reads %u", hdr[1],
                          STATE_VERSION);
    if (hdr[2] != m->fingerprint || hdr[3] != (uint32_t)m->cfg.n_layer || hdr[4] != (uint32_t)m->d_inner ||
        hdr[5] != (uint32_t)m->cfg.d_state || hdr[6] != (uint32_t)m->cfg.d_conv)
        return cq_err_set(err, CQ_ERR_INVALID,
                          "SSM state was written by another model shape (n_layer %u, d_inner %u, d_state %u, "
                          "d_conv %u): re-encode the document", hdr[3], hdr[4], hdr[5], hdr[6]);
    if (len != cq_ssm_state_size_bytes(m))
        return cq_err_set(err, CQ_ERR_FORMAT, "SSM state: %zu bytes, expected %zu", len, cq_ssm_state_size_bytes(m));
    cq_ssm_state *s;
    cq_status rc = cq_ssm_state_new(m, &s, err);
    if (rc) return rc;
    memcpy(&s->n_tokens, p + 32, 8);
    memcpy(s->conv, p + STATE_HEADER_BYTES, conv_floats(m) * sizeof(float));
    memcpy(s->h, p + STATE_HEADER_BYTES + conv_floats(m) * sizeof(float), h_floats(m) * sizeof(float));
    if (s->n_tokens < 0) {
        cq_ssm_state_free(s);
        return cq_err_set(err, CQ_ERR_FORMAT, "SSM state: negative token count");
    }
    *out = s;
    return CQ_OK;
}
