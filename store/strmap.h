/* Strings, each with its index in the order it was added: the keyword index's tokens (keyword_postings.c) and the
 * terms whose rows a connection keeps for BM25 (bm25.c). Open addressing on FNV-1a, at most half full. */
#ifndef CQ_STORE_STRMAP_H
#define CQ_STORE_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char **keys; /* by index: NUL-terminated copies */
    size_t n, cap;
    uint32_t *slots; /* index + 1, 0 empty */
    size_t n_slots;
} cq_strmap;

/* The index of key[0..len), added when absent when add is set; -1 when absent (or out of memory with add). */
long cq_strmap_find(cq_strmap *m, const char *key, size_t len, bool add);
/* Empties m; with keep_keys the caller has taken the strings of m->keys. */
void cq_strmap_free(cq_strmap *m, bool keep_keys);

#endif
