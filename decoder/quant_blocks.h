/* Internal: the block layouts of the GGUF formats (described in decoder/quant.h) shared by the kernel files
 * (quant.c: scalar and AVX2; quant_avx512.c: AVX-512), and the AVX-512 entry points that quant.c dispatches to. */
#ifndef CQ_DECODER_QUANT_BLOCKS_H
#define CQ_DECODER_QUANT_BLOCKS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "decoder/quant.h"

#define QK 32    /* elements per Q8_0 / Q5_0 block */
#define QK_K 256 /* elements per K-quant super-block */

typedef struct {
    uint16_t d;
    int8_t qs[QK];
} block_q8_0; /* 34 bytes */

typedef struct {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[QK / 2];
} block_q5_0; /* 22 bytes */

typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[QK_K / 2];
} block_q4_k; /* 144 bytes */

typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
} block_q6_k; /* 210 bytes */

_Static_assert(sizeof(block_q8_0) == 34, "Q8_0 block layout");
_Static_assert(sizeof(block_q5_0) == 22, "Q5_0 block layout");
_Static_assert(sizeof(block_q4_k) == 144, "Q4_K block layout");

/* A Q4_K super-block's 8 six-bit scales and 8 six-bit mins, one a byte (sub-block j in byte j), unpacked at once
 * from the three 32-bit words of `scales` (q4k_scale_min's layout). */
static inline void cq_q4k_scales_mins(const block_q4_k *b, uint64_t *scales, uint64_t *mins) {
    uint32_t w[3];
    memcpy(w, b->scales, sizeof w);
    *scales = (w[0] & 0x3f3f3f3fu) | (uint64_t)((w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u)) << 32;
    *mins = (w[1] & 0x3f3f3f3fu) | (uint64_t)(((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u)) << 32;
}
_Static_assert(sizeof(block_q6_k) == 210, "Q6_K block layout");

#if defined(__x86_64__) || defined(__i386__)
/* quant_avx512.c; called only when cq_isa_active() is CQ_ISA_AVX512, with a type of cq_qtype_has_i16_dot. */
void cq_dot_rows_i16_avx512(uint32_t type, const uint8_t *rows, size_t row_bytes, int n_rows, const cq_i16_block *x,
                            size_t n, float *y);
/* out's n_rows, n, block and min already set by cq_unpack_rows_i16 */
void cq_unpack_rows_i16_avx512(uint32_t type, const uint8_t *rows, size_t row_bytes, int n_rows, size_t n,
                               cq_rows_i16 *out);
#endif

#endif
