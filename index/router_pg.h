/* The router's reads on the PostgreSQL store (index/router.c dispatches here when cq_store_pg() is not NULL): the
 * same statements as its SQLite ones, over the tables of index/store_pg.h. */
#ifndef CQ_INDEX_ROUTER_PG_H
#define CQ_INDEX_ROUTER_PG_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "index/store_pg.h"

/* The KB's ready documents: how many, the largest id, the smallest (the title cache's key). */
cq_status cq_pg_router_docs_stat(cq_pg *pg, int64_t kb_id, int64_t *n_docs, int64_t *max_id, int64_t *min_id,
                                 cq_err *err);

/* Calls fn for each ready document of the KB (title may be NULL). */
typedef void (*cq_pg_router_doc_fn)(void *ctx, int64_t doc_id, const char *name, const char *title);
cq_status cq_pg_router_docs(cq_pg *pg, int64_t kb_id, cq_pg_router_doc_fn fn, void *ctx, cq_err *err);

/* The first clause (by order) of the document whose label_key is key: into out[*n] when *n < max. */
cq_status cq_pg_router_by_key(cq_pg *pg, int64_t doc_id, const char *key, int64_t *out, size_t max, size_t *n,
                              cq_err *err);
/* The document's articles (kind 1) whose path is LIKE pattern, in order: out[*n..max). */
cq_status cq_pg_router_by_path(cq_pg *pg, int64_t doc_id, const char *pattern, int64_t *out, size_t max, size_t *n,
                               cq_err *err);
/* The one ready document of the KB with a clause whose label_key is key; 0 when none or several. */
cq_status cq_pg_router_unique_doc(cq_pg *pg, int64_t kb_id, const char *key, int64_t *doc_id, cq_err *err);

#endif
