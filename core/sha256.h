/* SHA-256 (FIPS 180-4), for content hashes of uploaded files and model checks. */
#ifndef CQ_CORE_SHA256_H
#define CQ_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct {
    uint32_t h[8];
    uint64_t total_bytes;
    uint8_t block[64];
    size_t block_len;
} cq_sha256;

void cq_sha256_init(cq_sha256 *c);
void cq_sha256_update(cq_sha256 *c, const void *data, size_t n);
void cq_sha256_final(cq_sha256 *c, uint8_t digest[32]);

/* Hex digest (64 chars + NUL) of a buffer, or of a whole file read in chunks. */
void cq_sha256_hex(const void *data, size_t n, char out[65]);
cq_status cq_sha256_file_hex(const char *path, char out[65], cq_err *err);

#endif
