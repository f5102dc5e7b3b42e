/* The rows the clause-reference router reads (search/router.c), written once for both stores on db/db.h (issue 28):
 * the KB's ready documents for its title cache, and a document's clauses by label key or by chapter path. A few
 * rows a question; errors are db/'s ("router: …", CQ_ERR_BUSY while a PostgreSQL server is away). */
#ifndef CQ_STORE_ROUTER_ROWS_H
#define CQ_STORE_ROUTER_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "store/store.h"

/* The KB's ready documents: how many, the largest id, the smallest (the title cache's key; 0 and 0 when none). */
cq_status cq_store_router_docs_stat(cq_store *s, int64_t kb_id, int64_t *n_docs, int64_t *max_id, int64_t *min_id,
                                    cq_err *err);

/* Calls fn for each ready document of the KB, by id (title may be NULL). */
typedef void (*cq_store_router_doc_fn)(void *ctx, int64_t doc_id, const char *name, const char *title);
cq_status cq_store_router_docs(cq_store *s, int64_t kb_id, cq_store_router_doc_fn fn, void *ctx, cq_err *err);

/* The first clause (by order) of the document whose label_key is key: into out[*n] when *n < max. */
cq_status cq_store_router_by_key(cq_store *s, int64_t doc_id, const char *key, int64_t *out, size_t max, size_t *n,
                                 cq_err *err);
/* The document's articles (kind 1) whose path is LIKE pattern, in order: out[*n..max). */
cq_status cq_store_router_by_path(cq_store *s, int64_t doc_id, const char *pattern, int64_t *out, size_t max,
                                  size_t *n, cq_err *err);
/* A document that has a given clause label (cq_store_router_docs_with_key). */
typedef struct {
    int64_t doc_id;
    char *name;  /* what to call it: its title, else its name */
    char *group; /* its version group's key (store/versions.h), "" when it has none: then it stands alone */
    char *label; /* the label of its first clause with the key ("第五条", "Section 5"), "" when it has none */
} cq_store_label_doc;

/* The ready documents of KB kb_id with a clause whose label_key is key, by id, at most max, into out[0..*n) (free
 * with cq_store_label_docs_free). */
cq_status cq_store_router_docs_with_key(cq_store *s, int64_t kb_id, const char *key, cq_store_label_doc *out,
                                       size_t max, size_t *n, cq_err *err);
void cq_store_label_docs_free(cq_store_label_doc *docs, size_t n);

#endif
