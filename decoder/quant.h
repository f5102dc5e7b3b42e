/* Weight formats of GGUF tensors: block layouts, dequantization, and the dot products of the CPU forward.
 *
 * Every format stores a row of n elements as n / block_elems blocks (the type ids are ggml's, as written in GGUF):
 *   F32   1 x float                                                             4 B / 1
 *   F16   1 x IEEE half                                                         2 B / 1
 *   BF16  1 x bfloat16 (top half of a float)                                    2 B / 1
 *   Q8_0  half d; int8 q[32]                      x = d*q                       34 B / 32
 *   Q5_0  half d; u8 qh[4]; u8 qs[16]             x = d*(q - 16), q 5-bit:      22 B / 32
 *         low nibble of qs[j] is element j, high nibble element j+16; bit j of the 32-bit qh is the 5th bit
 *         of element j
 *   Q4_K  half d, dmin; u8 scales[12]; u8 qs[128]                               144 B / 256
 *         8 sub-blocks of 32 with 6-bit scale sc and min m (packed in scales[12]): x = d*sc*q - dmin*m, q 4-bit;
 *         qs holds 4 groups of 32 bytes, group g: low nibbles = sub-block 2g, high nibbles = sub-block 2g+1
 *   Q6_K  u8 ql[128]; u8 qh[64]; int8 scales[16]; half d                        210 B / 256
 *         16 sub-blocks of 16 with int8 scale: x = d*scale*(q - 32), q 6-bit = 4 low bits (ql) + 2 high (qh)
 *
 * The CPU forward keeps activations in float and dequantizes weights on the fly (exact up to float rounding: the
 * reference for the CUDA path), except in decode steps, where activations may be int16 (cq_i16_block below). The
 * kernels below use AVX-512 or AVX2 when the CPU has them (decoder/cpu_isa.h: chosen at run time) and a portable
 * scalar path otherwise; every path is tested against the plain dequantization. */
#ifndef CQ_DECODER_QUANT_H
#define CQ_DECODER_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    CQ_QTYPE_F32 = 0,
    CQ_QTYPE_F16 = 1,
    CQ_QTYPE_Q5_0 = 6,
    CQ_QTYPE_Q8_0 = 8,
    CQ_QTYPE_Q4_K = 12,
    CQ_QTYPE_Q6_K = 14,
    CQ_QTYPE_BF16 = 30,
} cq_qtype;

/* Elements and bytes per block; false for a type this reader does not know (the caller reports it). */
bool cq_qtype_block(uint32_t type, size_t *block_elems, size_t *block_bytes);
const char *cq_qtype_name(uint32_t type); /* "Q4_K"; "unknown" for a type this reader does not know */

float cq_f16_to_f32(uint16_t h);
uint16_t cq_f32_to_f16(float f);   /* round to nearest even */
float cq_bf16_to_f32(uint16_t h);
uint16_t cq_f32_to_bf16(float f);  /* round to nearest even */

/* Dequantizes n elements (a multiple of the block size) of a row of `type` into out. */
void cq_dequant_row(uint32_t type, const void *row, float *out, size_t n);

/* Dot product of a quantized row of n elements with a float vector x: sum_i w[i]*x[i]. */
float cq_dot_row(uint32_t type, const void *row, const float *x, size_t n);

/* Activations quantized to int16 for the fast decode products: per block of 32, x = d*q with d = max|x| / 32767
 * and q rounded to nearest, so every element is within max|x| / 65534 of its block's largest magnitude (int8, as
 * ggml does it, moved logits of the real model by up to 0.14; int16 costs the same here, the loads being the
 * limit). dsum = d * sum(q), the Q4_K min term. */
typedef struct {
    float d, dsum;
    int16_t qs[32];
} cq_i16_block;

bool cq_qtype_has_i16_dot(uint32_t type); /* Q8_0, Q5_0, Q4_K, Q6_K */
/* n a multiple of 32: out gets n / 32 blocks. */
void cq_quantize_i16(const float *x, size_t n, cq_i16_block *out);
/* y[r] = sum_i w_r[i] * xq[i] for the n_rows rows w_r at rows + r * row_bytes, each of n elements of a type with
 * cq_qtype_has_i16_dot (0 otherwise), xq = the dequantized blocks; integer products in the AVX2 and AVX-512
 * kernels. */
void cq_dot_rows_i16(uint32_t type, const void *rows, size_t row_bytes, int n_rows, const cq_i16_block *x, size_t n,
                     float *y);

/* Rows of weights as int16 quants with float block scales, for the multi-token integer products of prompts
 * (cq_k_rows_times_tokens_i16): w_r[i] = scale[r * (n / block) + i / block] * q[r * n + i] - min[r * (n / 32) + i / 32]
 * with the min term only where has_min (Q4_K). block is 32, or 16 for Q6_K (whose scales are per 16). Quants are at most 8
 * bits, so a block's integer dot with int16 activations stays within int32. The caller provides q (n_rows * n),
 * scale (n_rows * n / 16) and min (n_rows * n / 32) room. */
typedef struct {
    int n_rows, n, block;
    int16_t *q;
    float *scale;
    float *min;
    bool has_min;
} cq_rows_i16;

/* Unpacks n_rows rows (at rows + r * row_bytes, n elements each, a type with cq_qtype_has_i16_dot) into out, whose
 * q, scale and min point to the caller's room; sets out's n_rows, n, block and has_min. */
void cq_unpack_rows_i16(uint32_t type, const void *rows, size_t row_bytes, int n_rows, size_t n, cq_rows_i16 *out);

#endif
