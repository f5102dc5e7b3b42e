/* The one growth helper of capacity-doubling arrays (issue 28): instead of a hand-written
 *
 *     if (n == cap) { cap = cap ? cap * 2 : 16; p = realloc(list, cap * sizeof *list); ... }
 *
 * in every module, `if (cq_grow((void **)&list, &cap, n + 1, sizeof *list)) return out_of_memory;`. */
#ifndef CQ_CORE_GROW_H
#define CQ_CORE_GROW_H

#include <stdbool.h>
#include <stddef.h>

/* Makes room for at least `need` elements of elem_size bytes in *list (capacity *cap): the capacity doubles (from
 * 16 at first) until it holds need. Returns true on success; false when out of memory or when the size would
 * overflow, leaving *list and *cap as they were (the array is still the caller's to free). */
bool cq_grow(void **list, size_t *cap, size_t need, size_t elem_size);

#endif
