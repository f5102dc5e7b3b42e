/* What search/vectors.c and search/vector_feed.c share: a KB's FAISS index as an object (not part of the public
 * API). On PostgreSQL the index is a cache of clause_vectors, current to a position of the change feed (seq) that
 * is saved beside the FAISS file (kb<ID>.faiss.seq, written after it: a crash between the two leaves an older seq,
 * and replaying changes is harmless). */
#ifndef CQ_SEARCH_VECTORS_INTERNAL_H
#define CQ_SEARCH_VECTORS_INTERNAL_H

#include <faiss/c_api/Index_c.h>
#include <pthread.h>
#include <stdbool.h>

#include "search/vectors.h"

struct cq_vectors {
    int64_t kb_id;
    char model[80];
    int dim;
    char path[4096];
    FaissIndex *index;
    int ivf, dirty;
    int64_t seq; /* PostgreSQL: the last change of the feed the index includes; -1 on SQLite */
    pthread_rwlock_t lock;
};

/* Removes the ids remove[0..n_remove) and adds ids[0..n) with their vectors x, under the write lock. When the
 * flat index would grow past CQ_VECTORS_IVF_MIN it changes nothing and sets *rebuild: the caller rebuilds. */
cq_status cq_vectors_update(cq_vectors *v, const int64_t *remove, size_t n_remove, const int64_t *ids, const float *x,
                            size_t n, bool *rebuild, cq_err *err);

/* cq_vectors_open, and *rebuilt (may be NULL) says whether the index was rebuilt: the node's FAISS file is used when
 * it holds as many vectors as the store — on PostgreSQL when its seq is still covered by the feed, once caught up, in
 * one snapshot — else the index is rebuilt from the store (cq_vectors_rebuild). */
cq_status cq_vectors_load(cq_store *s, const char *data_dir, int64_t kb_id, const char *model, int dim,
                          cq_vectors **out, bool *rebuilt, cq_err *err);

/* ---- PostgreSQL (search/vector_feed.c): the vectors are shared (store/vectors.h) ---- */
/* Applies the feed's changes after `after` to the indexes v[0..n) (those of other KBs are skipped; each index only
 * takes changes after its own seq), then moves every index's seq to the last change read. *last (may be NULL) gets
 * it, *applied (may be NULL) how many changes touched an index. */
cq_status cq_vectors_catch_up(cq_store *s, cq_vectors *const *v, size_t n, int64_t after, int64_t *last,
                              size_t *applied, cq_err *err);

#endif
