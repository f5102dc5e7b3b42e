/* Internals shared by the index/ modules (not part of the public API). */
#ifndef CQ_INDEX_STORE_INTERNAL_H
#define CQ_INDEX_STORE_INTERNAL_H

#include "index/store.h"

/* The router's per-connection title cache (owned by the store, freed with it). */
void **cq_store_router_slot(cq_store *s);
/* index/versions.c's per-connection note of the KBs whose documents all have versions (malloc'd; freed with the
 * store). */
void **cq_store_versions_slot(cq_store *s);

/* index/bm25.c's per-connection statistics (freed with the store by cq_bm25_cache_free). */
void **cq_store_bm25_slot(cq_store *s);
void cq_bm25_cache_free(void *cache);

#endif
